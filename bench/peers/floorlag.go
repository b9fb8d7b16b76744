package main

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// runFloorLag is floor's open-loop mode (-rate), the schedule lag's
// reference: one goroutine sleeps to each due time (constant arrivals)
// and writes the request itself on an idle kept-alive connection (poolN
// of them dialled before the timed part, a new one when none is idle); a
// goroutine per request reads its answer, unparsed, and gives the
// connection back. What both it and tailgate lag is this machine's (timer
// wake-ups among the same number of streams, two processes on shared
// cores).
//
// It prints one line per request due after warmup: its lag (the write's
// start − its due time) in nanoseconds; then "failed <n>".
func runFloorLag(w *os.File, target string, rate float64, d, warmup time.Duration, tokens, poolN int) error {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-url %q: want http://host:port/path", target)
	}
	if rate <= 0 {
		return fmt.Errorf("-rate %v: want > 0", rate)
	}
	body := fmt.Sprintf(`{"model":"m","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, tokens)
	req := []byte(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.RequestURI(), u.Host, len(body), body))
	var mu sync.Mutex
	idle := make([]net.Conn, 0, poolN)
	for i := 0; i < poolN; i++ {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			return fmt.Errorf("preconnect %d: %w", i, err)
		}
		idle = append(idle, c)
	}
	var wg sync.WaitGroup
	var failed int
	fail := func() { mu.Lock(); failed++; mu.Unlock() }
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	// Answers end within the streams' length; this bounds a lost one.
	stop := start.Add(d + 30*time.Second)
	lags := make([]int64, 0, int(rate*d.Seconds())+1)
	sent := 0
	for i := 0; ; i++ {
		at := time.Duration(i) * interval
		if at >= d {
			break
		}
		sent++
		due := start.Add(at)
		time.Sleep(time.Until(due))
		mu.Lock()
		var c net.Conn
		if n := len(idle); n > 0 {
			c, idle = idle[n-1], idle[:n-1]
		}
		mu.Unlock()
		if c == nil {
			if c, err = net.Dial("tcp", u.Host); err != nil {
				fail()
				continue
			}
		}
		if at >= warmup {
			lags = append(lags, int64(time.Since(due)))
		}
		c.SetDeadline(stop)
		if _, err := c.Write(req); err != nil {
			c.Close()
			fail()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4<<10)
			var a answer
			for {
				n, err := c.Read(buf)
				if n > 0 {
					_, done, ferr := a.feed(buf[:n])
					if ferr != nil {
						err = ferr
					} else if done {
						mu.Lock()
						idle = append(idle, c)
						mu.Unlock()
						return
					}
				}
				if err != nil {
					c.Close()
					fail()
					return
				}
			}
		}()
	}
	wg.Wait()
	bw := bufio.NewWriter(w)
	for _, l := range lags {
		bw.WriteString(strconv.FormatInt(l, 10))
		bw.WriteByte('\n')
	}
	fmt.Fprintf(bw, "failed %d\n", failed)
	mu.Lock()
	for _, c := range idle {
		c.Close()
	}
	mu.Unlock()
	if err := bw.Flush(); err != nil {
		return err
	}
	// Its lags are still the sends', but a reference whose server failed
	// every request is not one.
	if failed == sent {
		return fmt.Errorf("every request failed (%d of %d): no answer from %s was a complete stream", failed, sent, target)
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "floor: %d of %d requests failed\n", failed, sent)
	}
	return nil
}

// parseFloorLag reads floor -rate's output: the lags in nanoseconds and the
// count of failed requests.
func parseFloorLag(out string) (lags []int64, failed int, err error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	done := false
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "failed "); ok {
			if failed, err = strconv.Atoi(n); err != nil {
				return nil, 0, fmt.Errorf("floor -rate: %q: %w", line, err)
			}
			done = true
			continue
		}
		v, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("floor -rate: %q: not a lag in ns", line)
		}
		lags = append(lags, v)
	}
	if !done {
		return nil, 0, fmt.Errorf("floor -rate: output ends before its \"failed\" line")
	}
	return lags, failed, sc.Err()
}
