package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clientReq is one request as a client saw it, wall-clock Unix
// nanoseconds (one host: the client's and the server's clocks agree).
type clientReq struct {
	ID          string
	Sent, First int64
	Failed      bool
}

// served is the server's record of one streamed request (GET /truth).
type served struct {
	ID    string `json:"id"`       // X-Request-Id
	Start int64  `json:"start_ns"` // the handler's start
	First int64  `json:"first_ns"` // the first event's flush
}

// pairing is a client's requests paired with the server's records.
type pairing struct {
	Errs     []int64 // ns per paired request: (first − sent) − (server's first − server's start)
	Unpaired int     // ok, but the server kept no record of its id
	Failed   int     // failed at the client: left out
	Left     int     // sent before the cut-off: left out
}

// pair pairs each request sent at or after from (Unix ns; 0: all) with
// the server's record of the same id.
func pair(reqs []clientReq, truth []served, from int64) pairing {
	byID := make(map[string]served, len(truth))
	for _, t := range truth {
		byID[t.ID] = t
	}
	var p pairing
	for _, r := range reqs {
		switch t, ok := byID[r.ID]; {
		case r.Sent < from:
			p.Left++
		case r.Failed:
			p.Failed++
		case !ok:
			p.Unpaired++
		default:
			p.Errs = append(p.Errs, (r.First-r.Sent)-(t.First-t.Start))
		}
	}
	return p
}

// meanP99 is the mean and the nearest-rank p99 of errs in milliseconds;
// ok false when there are none.
func meanP99(errs []int64) (mean, p99 float64, ok bool) {
	if len(errs) == 0 {
		return 0, 0, false
	}
	s := append([]int64(nil), errs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	return sum / float64(len(s)) / 1e6, float64(s[int(math.Ceil(0.99*float64(len(s))))-1]) / 1e6, true
}

// parseTailgate reads tailgate's requests.jsonl: seq (sent as the
// X-Request-Id), sent_us and first_token_us from the run's start
// (summary.json's run.started, RFC 3339 with nanoseconds).
func parseTailgate(started string, r io.Reader) ([]clientReq, error) {
	t0, err := time.Parse(time.RFC3339Nano, started)
	if err != nil {
		return nil, fmt.Errorf("run.started %q: %w", started, err)
	}
	base := t0.UnixNano()
	var reqs []clientReq
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var rec struct {
			Seq       int64  `json:"seq"`
			Sent      int64  `json:"sent_us"`
			First     *int64 `json:"first_token_us"`
			ErrorKind string `json:"error_kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("requests.jsonl line %d: %w", n, err)
		}
		c := clientReq{ID: strconv.FormatInt(rec.Seq, 10), Sent: base + rec.Sent*1000, Failed: rec.ErrorKind != "" || rec.First == nil}
		if rec.First != nil {
			c.First = base + *rec.First*1000
		}
		reqs = append(reqs, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("requests.jsonl: %w", err)
	}
	return reqs, nil
}

// parseFloor reads the floor client's output: "start <ns>", then
// "<id> <sent_ns> <first_ns>" per request (first 0: failed).
func parseFloor(r io.Reader) (start int64, reqs []clientReq, err error) {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 1 {
			if len(f) != 2 || f[0] != "start" {
				return 0, nil, fmt.Errorf("floor output line 1: %q, want \"start <ns>\"", sc.Text())
			}
			if start, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				return 0, nil, fmt.Errorf("floor output line 1: %w", err)
			}
			continue
		}
		if len(f) != 3 {
			return 0, nil, fmt.Errorf("floor output line %d: %q, want \"<id> <sent_ns> <first_ns>\"", n, sc.Text())
		}
		c := clientReq{ID: f[0]}
		c.Sent, err = strconv.ParseInt(f[1], 10, 64)
		if err == nil {
			c.First, err = strconv.ParseInt(f[2], 10, 64)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("floor output line %d: %w", n, err)
		}
		c.Failed = c.First == 0
		reqs = append(reqs, c)
	}
	if err := sc.Err(); err != nil {
		return 0, nil, err
	}
	if start == 0 {
		return 0, nil, fmt.Errorf("floor output: empty")
	}
	return start, reqs, nil
}
