package loadgen

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// dialClient dials addr for each request: a refused dial is a connection
// failure, as the transports classify it. up, if set, says whether the
// request at its send instant is answered instead (a server back up).
type dialClient struct {
	addr     string
	up       func(t time.Duration) bool
	attempts atomic.Int64
}

func (d *dialClient) Do(ctx context.Context, p *prompts.Prompt, rec *Record) {
	d.attempts.Add(1)
	rec.Sent = rec.Now()
	defer func() { rec.End = rec.Now() }()
	if d.up != nil && d.up(rec.Sent) {
		time.Sleep(10 * time.Millisecond) // the server's answer time
		rec.AddChunk(Chunk{At: rec.Now(), Tokens: 1})
		rec.OutputTokens, rec.Text = 1, "a"
		return
	}
	c, err := net.Dial("tcp", d.addr)
	if err == nil {
		c.Close()
		rec.ErrorKind, rec.Error = ErrServer, "dial unexpectedly succeeded"
		return
	}
	rec.ErrorKind, rec.Error = ErrConnect, "dial "+d.addr+": "+err.Error()
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestBackoffWaits(t *testing.T) {
	t.Parallel()
	var b backoff
	if d := b.wait(); d != 0 {
		t.Fatalf("no failure: wait %v, want 0", d)
	}
	want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		b.note(ErrConnect)
		if d := b.wait(); d != w*time.Millisecond {
			t.Errorf("after %d failures: wait %v, want %v", i+1, d, w*time.Millisecond)
		}
	}
	b.note(ErrServer) // an answer, even an error one, resets it
	if d := b.wait(); d != 0 {
		t.Errorf("after an HTTP error: wait %v, want 0", d)
	}
}

// Against a closed port each worker backs off 10, 20, … ms up to 1 s: in
// 10 s that is about 16 attempts a worker, not thousands, with one
// record per attempt and each wait shown as schedule lag.
func TestClosedLoopBacksOffAgainstDeadServer(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	synctest.Test(t, func(t *testing.T) {
		c := &dialClient{addr: addr}
		recs, info := collect(t, context.Background(), c, src(), Options{Closed: true,
			Stages: []Stage{{Concurrency: 4, Duration: 10 * time.Second}}})
		// Per worker: sends at 0, 10, 30, 70, 150, 310, 630, 1270 ms, then
		// every second: 2270 … 9270 ms, 16 in all.
		if n := c.attempts.Load(); n != 4*16 {
			t.Errorf("%d attempts, want 64 (16 per worker)", n)
		}
		if int64(len(recs)) != c.attempts.Load() || info.Sent != int64(len(recs)) {
			t.Errorf("%d records, %d sent, %d attempts: want one record per attempt", len(recs), info.Sent, c.attempts.Load())
		}
		var lag time.Duration
		for _, r := range recs {
			if r.ErrorKind != ErrConnect {
				t.Fatalf("record %d: kind %q, want connect", r.Seq, r.ErrorKind)
			}
			lag += r.ScheduleLag()
		}
		// Every wait but the first request's is lag: per worker 10 … 640
		// ms (1270 ms) and eight 1 s waits.
		if want := 4 * (1270*time.Millisecond + 8*time.Second); lag != want {
			t.Errorf("total schedule lag %v, want %v (every backoff wait)", lag, want)
		}
	})
}

// A success resets the backoff: once the server is back, the worker
// sends one request after another again, without waiting.
func TestClosedLoopBackoffResetsOnSuccess(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	synctest.Test(t, func(t *testing.T) {
		back := 2 * time.Second
		c := &dialClient{addr: addr, up: func(at time.Duration) bool { return at >= back }}
		recs, _ := collect(t, context.Background(), c, src(), Options{Closed: true,
			Stages: []Stage{{Concurrency: 1, Duration: 3 * time.Second}}})
		var fails, oks int
		for _, r := range recs {
			switch {
			case r.ErrorKind == ErrConnect:
				fails++
			case r.OK():
				// The first success waited the last backoff; the rest none.
				if lag := r.ScheduleLag(); oks > 0 && lag != 0 {
					t.Errorf("success at %v after the first: lag %v, want 0 (backoff reset)", r.Sent, lag)
				}
				oks++
			default:
				t.Fatalf("record %d: kind %q", r.Seq, r.ErrorKind)
			}
		}
		// Failures at 0, 10, 30, 70, 150, 310, 630, 1270 ms; then at 2270 ms
		// the server answers, and 10 ms answers back to back fill the 730
		// ms left: 73 of them.
		if fails != 8 || oks != 73 {
			t.Errorf("%d connection failures and %d successes, want 8 and 73", fails, oks)
		}
	})
}
