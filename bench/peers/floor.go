package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// floor is the cheapest streaming client for TTFT: c kept-alive TCP
// connections, each sending its next request when the last ends, timing
// the first read that brings the first event and reading the chunked
// answer to its end without parsing it. It is Go in the same runtime as
// tailgate on purpose: what tailgate's TTFT error has beyond the floor's is
// tailgate's own cost; what both have is this machine's (two processes'
// wake-ups and loopback).
//
// It prints "start <ns>" (the timed part's start) and then one line per
// request: "<id> <sent_ns> <first_ns>", wall-clock Unix nanoseconds, first
// 0 for a request that failed. With -rate it is open-loop instead
// (runFloorLag).
func floor(args []string) {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	target := fs.String("url", "", "chat completions URL (http://host:port/path)")
	c := fs.Int("c", 256, "streams at once")
	d := fs.Duration("d", 5*time.Second, "how long to start requests")
	tokens := fs.Int("tokens", 16, "max_tokens")
	pre := fs.Bool("preconnect", false, "dial every connection before the timed part (as tailgate's --preconnect); otherwise each is dialled by its first request, inside its send time")
	rate := fs.Float64("rate", 0, "open loop: requests a second, constant arrivals (-c connections dialled first; -preconnect ignored), printing each one's schedule lag")
	warmup := fs.Duration("warmup", 0, "open loop: requests due before this are sent but not reported")
	fs.Parse(args)
	var err error
	if *rate > 0 {
		err = runFloorLag(os.Stdout, *target, *rate, *d, *warmup, *tokens, *c)
	} else {
		err = runFloor(os.Stdout, *target, *c, *d, *tokens, *pre)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// floorReq is one request's instants, wall-clock Unix nanoseconds.
type floorReq struct {
	id          int64
	sent, first int64 // first 0: failed
}

func runFloor(w *os.File, target string, c int, d time.Duration, tokens int, pre bool) error {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-url %q: want http://host:port/path", target)
	}
	body := fmt.Sprintf(`{"model":"m","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, tokens)
	head := []byte(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nX-Request-Id: floor-", u.RequestURI(), u.Host, len(body)))
	tailBytes := []byte("\r\n\r\n" + body)
	conns := make([]net.Conn, c)
	if pre {
		for i := range conns {
			if conns[i], err = net.Dial("tcp", u.Host); err != nil {
				return fmt.Errorf("preconnect %d: %w", i, err)
			}
		}
	}
	start := time.Now()
	deadline := start.Add(d)
	var next atomic.Int64
	var mu sync.Mutex
	var all []floorReq
	var firstErr error
	var wg sync.WaitGroup
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func(conn net.Conn) {
			defer wg.Done()
			var mine []floorReq
			var werr error
			buf := make([]byte, 32<<10)
			req := make([]byte, 0, len(head)+len(tailBytes)+20)
			var a answer
			for time.Now().Before(deadline) {
				id := next.Add(1) - 1
				req = append(strconv.AppendInt(append(req[:0], head...), id, 10), tailBytes...)
				r := floorReq{id: id}
				// A request that dials pays for it inside its TTFT, as
				// tailgate's cold connections do.
				r.sent = time.Now().UnixNano()
				first, err := func() (int64, error) {
					if conn == nil {
						var err error
						if conn, err = net.Dial("tcp", u.Host); err != nil {
							return 0, err
						}
					}
					// Bounded: a lost answer cannot hold the run.
					conn.SetDeadline(deadline.Add(30 * time.Second))
					if _, err := conn.Write(req); err != nil {
						return 0, err
					}
					a.reset()
					var first int64
					for {
						n, err := conn.Read(buf)
						if n > 0 {
							at := time.Now().UnixNano()
							data, done, ferr := a.feed(buf[:n])
							if ferr != nil {
								return 0, ferr
							}
							if data {
								first = at
							}
							if done {
								return first, nil
							}
						}
						if err != nil {
							return 0, err
						}
					}
				}()
				if err != nil {
					if conn != nil {
						conn.Close()
						conn = nil
					}
					if werr == nil {
						werr = err
					}
					first = 0
				}
				r.first = first
				mine = append(mine, r)
			}
			if conn != nil {
				conn.Close()
			}
			mu.Lock()
			all = append(all, mine...)
			if firstErr == nil {
				firstErr = werr
			}
			mu.Unlock()
		}(conns[i])
	}
	wg.Wait()
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "start %d\n", start.UnixNano())
	failed := 0
	for _, r := range all {
		fmt.Fprintf(bw, "floor-%d %d %d\n", r.id, r.sent, r.first)
		if r.first == 0 {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "floor: %d of %d requests failed; the first: %v\n", failed, len(all), firstErr)
	}
	return bw.Flush()
}

// answer follows one HTTP/1.1 answer of the minimal server across reads,
// without parsing its JSON: the head (status 200 wanted), the first
// "data:" (the first event's bytes), "[DONE]", then the chunked body's
// last chunk ("0\r\n\r\n").
type answer struct {
	head  []byte // the head so far, until its end is found
	stage int    // 0 head, 1 before "data:", 2 before "[DONE]", 3 before the last chunk, 4 complete
	tail  [8]byte
	tn    int // the last bytes searched for the current stage's pattern, for a pattern split across reads
}

var (
	headEnd   = []byte("\r\n\r\n")
	stagePats = [...][]byte{nil, []byte("data:"), []byte("[DONE]"), []byte("0\r\n\r\n")}
)

func (a *answer) reset() { a.head, a.stage, a.tn = a.head[:0], 0, 0 }

// feed takes one read's bytes. data: the first "data:" was completed by
// these bytes; done: the answer is complete.
func (a *answer) feed(b []byte) (data, done bool, err error) {
	if a.stage == 0 {
		a.head = append(a.head, b...)
		i := bytes.Index(a.head, headEnd)
		if i < 0 {
			if len(a.head) > 8<<10 {
				return false, false, errors.New("answer head over 8 KiB")
			}
			return false, false, nil
		}
		if !bytes.HasPrefix(a.head, []byte("HTTP/1.1 200 ")) {
			line, _, _ := bytes.Cut(a.head, []byte("\r\n"))
			return false, false, fmt.Errorf("answer %q", line)
		}
		b = a.head[i+len(headEnd):]
		a.stage, a.tn = 1, 0
	}
	pos := 0
	for a.stage < 4 {
		e := find(a.tail[:a.tn], b[pos:], stagePats[a.stage])
		if e < 0 {
			break
		}
		if a.stage == 1 {
			data = true
		}
		a.stage++
		pos += e
		a.tn = 0 // what follows a match is searched from the match's end
	}
	// Keep the last bytes searched (old tail, then the rest of b) for the
	// next read.
	rest := b[pos:]
	if len(rest) >= len(a.tail) {
		a.tn = copy(a.tail[:], rest[len(rest)-len(a.tail):])
	} else {
		keep := min(a.tn, len(a.tail)-len(rest))
		copy(a.tail[:], a.tail[a.tn-keep:a.tn])
		a.tn = keep + copy(a.tail[keep:], rest)
	}
	return data, a.stage == 4, nil
}

// find returns the end, in b, of pat's first match in tail+b that ends in
// b, or -1.
func find(tail, b, pat []byte) int {
	if len(tail) > 0 {
		var j [16]byte
		n := copy(j[:], tail)
		m := copy(j[n:], b[:min(len(b), len(pat)-1)])
		if i := bytes.Index(j[:n+m], pat); i >= 0 && i+len(pat) > n {
			return i + len(pat) - n
		}
	}
	if i := bytes.Index(b, pat); i >= 0 {
		return i + len(pat)
	}
	return -1
}
