package loadgen

import (
	"context"
	"errors"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// fakeClient answers after a delay computed from the send instant, with
// tokens evenly spaced: a server whose delays are known exactly.
type fakeClient struct {
	ttft, itl time.Duration
	tokens    int
	// hold, if set, returns how long the server is frozen when a request
	// arrives at offset t (a stall); the whole response shifts by it.
	hold func(t time.Duration) time.Duration
	// late, if set, delays the send of request seq by what it returns: a
	// generator that was late (schedule lag) for that one request.
	late     func(seq int64) time.Duration
	inflight atomic.Int64
	maxSeen  atomic.Int64
}

func (f *fakeClient) Do(ctx context.Context, p *prompts.Prompt, rec *Record) {
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxSeen.Load()
		if n <= m || f.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	if f.late != nil {
		time.Sleep(f.late(rec.Seq))
	}
	rec.Sent = rec.Now()
	wait := f.ttft
	if f.hold != nil {
		wait += f.hold(rec.Sent)
	}
	for i := 0; i < f.tokens; i++ {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			rec.End = rec.Now()
			if ctx.Err() == context.DeadlineExceeded {
				rec.ErrorKind = ErrTimeout
			} else {
				rec.ErrorKind = ErrCancelled
			}
			return
		}
		rec.AddChunk(Chunk{At: rec.Now(), Tokens: 1})
		wait = f.itl
	}
	rec.OutputTokens = f.tokens
	rec.End = rec.Now()
	rec.Text = "answer"
}

func collect(t *testing.T, ctx context.Context, c Client, src Source, opts Options) ([]*Record, Info) {
	t.Helper()
	r, err := NewRunner(c, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *Record, 1024)
	var recs []*Record
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rec := range out {
			if rec.TokenSource == "" {
				t.Errorf("record %d (%s) delivered before Finalize", rec.Seq, rec.ErrorKind)
			}
			recs = append(recs, rec)
		}
	}()
	info, err := r.Run(ctx, out)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	return recs, info
}

func src() Source { return &Repeat{Prompt: prompts.Prompt{ID: "p", Class: "chat"}} }

// In a synctest bubble time moves only when every goroutine waits, so
// a runner that sends on its schedule sends exactly on it: lag 0, TTFT
// exactly the server's, however loaded the machine.
func TestOpenLoopSendsOnSchedule(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 3}
		recs, info := collect(t, context.Background(), c, src(), Options{Stages: []Stage{{Name: "s", Rate: 100, Duration: time.Second}}})
		if len(recs) != 100 || info.Sent != 100 {
			t.Fatalf("got %d records, %d sent; want 100", len(recs), info.Sent)
		}
		for i, r := range recs {
			if r.Intended != time.Duration(i)*10*time.Millisecond {
				t.Fatalf("record %d intended %v", i, r.Intended)
			}
			if lag := r.ScheduleLag(); lag != 0 {
				t.Errorf("record %d schedule lag %v, want 0", i, lag)
			}
			if !r.OK() || r.OutputTokens != 3 || r.Stage != "s" {
				t.Fatalf("record %d: %+v", i, r)
			}
			if ttft, _ := r.TTFT(); ttft != 5*time.Millisecond {
				t.Errorf("record %d TTFT %v, want the server's 5ms", i, ttft)
			}
			if e2e := r.E2E(); e2e != 7*time.Millisecond {
				t.Errorf("record %d E2E %v, want 5ms + 2 × 1ms", i, e2e)
			}
		}
		if info.Elapsed != 990*time.Millisecond+7*time.Millisecond {
			t.Errorf("elapsed %v, want the last send (990ms) + its 7ms answer", info.Elapsed)
		}
	})
}

// With a server frozen for 500 ms, open-loop latencies measured from the
// intended start must include the time each request waited for the
// freeze to end, even when the cap forces requests to start late.
func TestOpenLoopCountsStallFromIntendedStart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		stallFrom, stallTo := 300*time.Millisecond, 800*time.Millisecond
		c := &fakeClient{ttft: 2 * time.Millisecond, tokens: 1, hold: func(at time.Duration) time.Duration {
			if at >= stallFrom && at < stallTo {
				return stallTo - at
			}
			return 0
		}}
		// MaxInFlight 5: during the stall requests queue in the generator, as
		// in a closed pool; they must still be charged from their schedule.
		recs, _ := collect(t, context.Background(), c, src(), Options{MaxInFlight: 5,
			Stages: []Stage{{Rate: 100, Duration: 1500 * time.Millisecond}}})
		if len(recs) != 150 {
			t.Fatalf("%d records", len(recs))
		}
		for _, r := range recs {
			if r.Intended >= stallFrom && r.Intended < stallTo-10*time.Millisecond {
				want := stallTo - r.Intended
				if r.E2E() < want {
					t.Errorf("request due at %v: E2E %v hides the stall (want ≥ %v)", r.Intended, r.E2E(), want)
				}
			}
		}
	})
}

func TestClosedLoopHoldsConcurrency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 10 * time.Millisecond, tokens: 1}
		recs, _ := collect(t, context.Background(), c, src(), Options{Closed: true,
			Stages: []Stage{{Concurrency: 4, Duration: 500 * time.Millisecond}}})
		if m := c.maxSeen.Load(); m != 4 {
			t.Errorf("max in flight %d, want 4", m)
		}
		// 4 workers × one 10 ms request after another over 0.5 s.
		if len(recs) != 200 {
			t.Errorf("%d requests, want 200", len(recs))
		}
		for _, r := range recs {
			if lag := r.ScheduleLag(); lag != 0 {
				t.Fatalf("closed loop: intended start should be the send, lag %v", lag)
			}
		}
	})
}

func TestDroppedWhenCapNeverFrees(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: time.Second, tokens: 1}
		recs, info := collect(t, context.Background(), c, src(), Options{MaxInFlight: 2,
			Stages: []Stage{{Rate: 100, Duration: 200 * time.Millisecond}}})
		if info.Sent != 2 || info.Dropped != 18 {
			t.Fatalf("sent %d dropped %d, want 2 and 18", info.Sent, info.Dropped)
		}
		dropped := 0
		for _, r := range recs {
			if r.ErrorKind == ErrDropped {
				dropped++
			}
		}
		if dropped != 18 || len(recs) != 20 {
			t.Errorf("records: %d total, %d dropped", len(recs), dropped)
		}
	})
}

func TestInterruptCancelsInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 10 * time.Second, tokens: 1}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(150*time.Millisecond, cancel)
		start := time.Now()
		recs, info := collect(t, ctx, c, src(), Options{Stages: []Stage{{Rate: 100, Duration: 10 * time.Second}}})
		if el := time.Since(start); el != 150*time.Millisecond {
			t.Fatalf("run took %v, want to end at the interrupt (150ms)", el)
		}
		if !info.Interrupted {
			t.Error("Info.Interrupted false")
		}
		// Due at 0, 10, …, 140 ms, and 150 ms if it comes before the interrupt.
		if len(recs) < 15 || len(recs) > 16 || int64(len(recs)) != info.Sent {
			t.Fatalf("%d records for %d sent", len(recs), info.Sent)
		}
		for _, r := range recs {
			if r.ErrorKind != ErrCancelled {
				t.Fatalf("in-flight record kind %q, want cancelled", r.ErrorKind)
			}
		}
	})
}

func TestTimeoutPerRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: time.Second, tokens: 1}
		recs, _ := collect(t, context.Background(), c, src(), Options{Timeout: 50 * time.Millisecond, Requests: 3,
			Stages: []Stage{{Rate: 100, Duration: time.Second}}})
		if len(recs) != 3 {
			t.Fatalf("%d records, want 3 (request cap)", len(recs))
		}
		for _, r := range recs {
			if r.ErrorKind != ErrTimeout {
				t.Errorf("kind %q, want timeout", r.ErrorKind)
			}
		}
	})
}

// keeperClient keeps its requests' deadlines itself (DeadlineKeeper), as
// the lean HTTP client does with connection deadlines: it waits for the
// deadline's instant or the context's Done, and reads Err; one that does
// not keep them waits for Done alone.
type keeperClient struct{ keeps bool }

func (k keeperClient) KeepsDeadline() bool { return k.keeps }

func (k keeperClient) Do(ctx context.Context, p *prompts.Prompt, rec *Record) {
	rec.Sent = rec.Now()
	d, ok := ctx.Deadline()
	if !ok {
		rec.ErrorKind, rec.Error = ErrProtocol, "no deadline"
		return
	}
	if _, soft := SoftDeadline(ctx); soft != k.keeps {
		rec.ErrorKind, rec.Error = ErrProtocol, "soft deadline given to a client that does not keep it, or the reverse"
		return
	}
	if k.keeps {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	} else {
		<-ctx.Done()
	}
	rec.End = rec.Now()
	switch err := ctx.Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		rec.ErrorKind = ErrTimeout
	case err != nil:
		rec.ErrorKind = ErrCancelled
	}
}

// A client that keeps deadlines gets each request's deadline without a
// timer (Done does not close for it) and Err says it passed; an interrupt
// still reaches it through Done. One that does not gets a Done that closes
// at the deadline.
func TestDeadlineKeeper(t *testing.T) {
	t.Parallel()
	for _, keeps := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			recs, _ := collect(t, context.Background(), keeperClient{keeps}, src(), Options{Timeout: 50 * time.Millisecond, Requests: 3,
				Stages: []Stage{{Rate: 100, Duration: time.Second}}})
			if len(recs) != 3 {
				t.Fatalf("keeps %v: %d records, want 3", keeps, len(recs))
			}
			for _, r := range recs {
				if r.ErrorKind != ErrTimeout || r.End-r.Sent != 50*time.Millisecond {
					t.Errorf("keeps %v: kind %q after %v, want timeout after 50ms", keeps, r.ErrorKind, r.End-r.Sent)
				}
			}
		})
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			recs, _ := collect(t, ctx, keeperClient{keeps}, src(), Options{Timeout: time.Second, Requests: 1,
				Stages: []Stage{{Rate: 100, Duration: time.Second}}})
			if len(recs) != 1 || recs[0].ErrorKind != ErrCancelled || recs[0].End-recs[0].Sent != 20*time.Millisecond {
				t.Errorf("keeps %v: interrupted at 20ms: %+v", keeps, recs)
			}
		})
	}
	// Made hard, a soft deadline closes Done when it passes.
	synctest.Test(t, func(t *testing.T) {
		soft := WithSoftDeadline(context.Background(), time.Now().Add(time.Second))
		if soft.Done() != nil {
			t.Fatal("a soft deadline over Background has a Done channel")
		}
		hard, cancel := HardDeadline(context.WithValue(soft, keeperClient{}, 1))
		defer cancel()
		<-hard.Done()
		if !errors.Is(hard.Err(), context.DeadlineExceeded) || !errors.Is(soft.Err(), context.DeadlineExceeded) {
			t.Errorf("after the deadline: hard %v, soft %v", hard.Err(), soft.Err())
		}
		if same, _ := HardDeadline(context.Background()); same != context.Background() {
			t.Error("HardDeadline changed a context without a soft deadline")
		}
	})
}

func TestWarmupMarking(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{tokens: 1}
		recs, _ := collect(t, context.Background(), c, src(), Options{WarmupRequests: 5,
			Stages: []Stage{{Rate: 100, Duration: 200 * time.Millisecond}}})
		for _, r := range recs {
			if r.Warmup != (r.Seq < 5) {
				t.Errorf("seq %d warmup %v", r.Seq, r.Warmup)
			}
		}
		m := NewMeasured()
		for _, r := range recs {
			m.Add(r)
		}
		if warmup, sent := m.Counts(); warmup != 5 || sent != 15 {
			t.Errorf("metrics: warmup %d sent %d", warmup, sent)
		}
	})
}

// sessionSource starts 3-turn conversations; each follow-up must carry the
// previous answer and be due Think after it.
type sessionSource struct{ n int }

func (s *sessionSource) Next() (*prompts.Prompt, error) {
	s.n++
	return turn("s"+string(rune('a'+s.n%26)), 0, nil), nil
}

func turn(id string, i int, hist []prompts.Message) *prompts.Prompt {
	msgs := append(append([]prompts.Message{}, hist...), prompts.Message{Role: "user", Content: "q"})
	p := &prompts.Prompt{Session: id, Turn: i, Messages: msgs, Think: 20 * time.Millisecond}
	if i < 2 {
		p.FollowUp = func(answer string) *prompts.Prompt {
			return turn(id, i+1, append(msgs, prompts.Message{Role: "assistant", Content: answer}))
		}
	}
	return p
}

func TestSessionsFollowUpAfterThink(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, tokens: 1}
		recs, _ := collect(t, context.Background(), c, &sessionSource{}, Options{
			Stages: []Stage{{Rate: 10, Duration: 300 * time.Millisecond}}})
		byTurn := map[int]int{}
		for _, r := range recs {
			byTurn[r.Turn]++
		}
		if byTurn[0] != 3 || byTurn[1] != 3 || byTurn[2] != 3 {
			t.Fatalf("turns sent %v, want 3 of each", byTurn)
		}
		ends := map[string]time.Duration{}
		for _, r := range recs {
			if r.Turn > 0 {
				if prev, ok := ends[r.Session]; ok && r.Intended-prev != 20*time.Millisecond {
					t.Errorf("session %s turn %d due %v after the previous end, want 20ms", r.Session, r.Turn, r.Intended-prev)
				}
			}
			ends[r.Session] = r.End
		}
	})
}

// An interrupt does not wait for sessions' pending turns to come due.
func TestInterruptDoesNotWaitForThinkTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: time.Millisecond, tokens: 1}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		src := &longThink{}
		collect(t, ctx, c, src, Options{Stages: []Stage{{Rate: 50, Duration: time.Minute}}})
		if el := time.Since(start); el != 100*time.Millisecond {
			t.Errorf("Run returned %v after start, want at the interrupt (100ms); pending 30 s think times held it", el)
		}
	})
}

type longThink struct{}

func (longThink) Next() (*prompts.Prompt, error) {
	p := &prompts.Prompt{Session: "s", Text: "q"}
	p.FollowUp = func(string) *prompts.Prompt { return &prompts.Prompt{Session: "s", Turn: 1, Think: 30 * time.Second} }
	return p, nil
}

func kinds(recs []*Record) map[ErrorKind]int {
	out := map[ErrorKind]int{}
	for _, r := range recs {
		out[r.ErrorKind]++
	}
	return out
}

// Requests still in flight when the grace after the schedule ends runs out
// are cut (cut_at_end), not left to run to their 2-minute timeout; those
// that finish within it are kept.
func TestGraceCutsRequestsInFlightAtEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// 20/s over 500 ms: sends at 0, 50, …, 450 ms. The server answers in
		// 50 ms, except that it freezes for 10 s for requests from 300 ms on.
		c := &fakeClient{ttft: 50 * time.Millisecond, tokens: 1, hold: func(at time.Duration) time.Duration {
			if at >= 300*time.Millisecond {
				return 10 * time.Second
			}
			return 0
		}}
		start := time.Now()
		recs, info := collect(t, context.Background(), c, src(), Options{Grace: 200 * time.Millisecond,
			Stages: []Stage{{Rate: 20, Duration: 500 * time.Millisecond}}})
		el := time.Since(start)
		// The run ends at the schedule's end + grace: 700 ms, not 10 s.
		if el != 700*time.Millisecond {
			t.Errorf("run took %v, want ~700ms (500ms schedule + 200ms grace)", el)
		}
		k := kinds(recs)
		if len(recs) != 10 || k[ErrNone] != 6 || k[ErrCutAtEnd] != 4 || info.CutAtEnd != 4 {
			t.Fatalf("kinds %v, Info.CutAtEnd %d; want 6 ok and 4 cut of 10", k, info.CutAtEnd)
		}
		for _, r := range recs {
			if r.ErrorKind != ErrCutAtEnd {
				continue
			}
			if r.Intended < 300*time.Millisecond || !strings.Contains(r.Error, "grace") {
				t.Errorf("cut record due %v: %q", r.Intended, r.Error)
			}
			if end := r.End; end != 700*time.Millisecond {
				t.Errorf("cut record ended at %v, want at the grace's end (700ms)", end)
			}
		}
		if info.Grace != 200*time.Millisecond || info.Interrupted || info.Stopped != nil {
			t.Errorf("info %+v", info)
		}
	})
}

// A negative grace cuts at the schedule's end; the default is 30 s.
func TestGraceNoneAndDefault(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 10 * time.Second, tokens: 1}
		start := time.Now()
		recs, info := collect(t, context.Background(), c, src(), Options{Grace: -1,
			Stages: []Stage{{Rate: 20, Duration: 200 * time.Millisecond}}})
		if el := time.Since(start); el != 200*time.Millisecond {
			t.Errorf("run took %v, want ~200ms", el)
		}
		if k := kinds(recs); k[ErrCutAtEnd] != 4 || len(recs) != 4 || info.Grace != 0 {
			t.Errorf("kinds %v, grace %v", k, info.Grace)
		}
		r, err := NewRunner(c, src(), Options{Stages: []Stage{{Rate: 1, Duration: time.Second}}})
		if err != nil || r.grace != DefaultGrace {
			t.Errorf("default grace %v, %v", r.grace, err)
		}
	})
}

// When sending stops before the stages end (request count reached), the
// grace runs from then, not from the stages' end.
func TestGraceRunsFromEarlyEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 10 * time.Second, tokens: 1}
		start := time.Now()
		recs, info := collect(t, context.Background(), c, src(), Options{Requests: 2, Grace: 100 * time.Millisecond,
			Stages: []Stage{{Rate: 100, Duration: 10 * time.Second}}})
		if el := time.Since(start); el != 110*time.Millisecond {
			t.Errorf("run took %v; the grace should run from the 2nd send (10ms), to 110ms", el)
		}
		if k := kinds(recs); k[ErrCutAtEnd] != 2 {
			t.Errorf("kinds %v", k)
		}
		if w := info.Scheduled; w.From != 0 || w.To != 10*time.Millisecond {
			t.Errorf("scheduled window %+v, want 0 → 10ms (the 2nd send)", w)
		}
	})
}

func TestGraceClosedLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 10 * time.Second, tokens: 1}
		start := time.Now()
		recs, info := collect(t, context.Background(), c, src(), Options{Closed: true, Grace: 100 * time.Millisecond,
			Stages: []Stage{{Concurrency: 3, Duration: 200 * time.Millisecond}}})
		if el := time.Since(start); el != 300*time.Millisecond {
			t.Errorf("run took %v, want 300ms (200ms schedule + 100ms grace)", el)
		}
		if k := kinds(recs); k[ErrCutAtEnd] != 3 || len(recs) != 3 || info.CutAtEnd != 3 {
			t.Errorf("kinds %v", k)
		}
	})
}

// Ctrl-C during the grace still cancels: the requests are cancelled, not
// cut, and the run is interrupted.
func TestInterruptDuringGraceCancels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 10 * time.Second, tokens: 1}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		recs, info := collect(t, ctx, c, src(), Options{Grace: 5 * time.Second,
			Stages: []Stage{{Rate: 20, Duration: 100 * time.Millisecond}}})
		if el := time.Since(start); el != 300*time.Millisecond {
			t.Errorf("run took %v, want to end at the interrupt (300ms)", el)
		}
		if k := kinds(recs); k[ErrCancelled] != 2 || len(recs) != 2 || !info.Interrupted || info.CutAtEnd != 0 {
			t.Errorf("kinds %v, info %+v", k, info)
		}
	})
}

// Stop ends the run at once without marking it interrupted: in-flight
// requests are cancelled naming the reason, nothing more is sent.
func TestStopOnDemand(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 10 * time.Second, tokens: 1}
		r, err := NewRunner(c, src(), Options{Stages: []Stage{{Rate: 100, Duration: 10 * time.Second}}})
		if err != nil {
			t.Fatal(err)
		}
		reason := errors.New("requests.jsonl: no space left on device")
		time.AfterFunc(150*time.Millisecond, func() { r.Stop(reason) })
		out := make(chan *Record, 1024)
		start := time.Now()
		info, err := r.Run(context.Background(), out)
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el != 150*time.Millisecond {
			t.Errorf("run took %v, want to end at the Stop (150ms)", el)
		}
		if !errors.Is(info.Stopped, reason) || info.Interrupted {
			t.Errorf("Stopped %v Interrupted %v", info.Stopped, info.Interrupted)
		}
		n := 0
		for rec := range out {
			n++
			if rec.ErrorKind != ErrCancelled || !strings.Contains(rec.Error, "no space left") {
				t.Errorf("record %d: %s %q", rec.Seq, rec.ErrorKind, rec.Error)
			}
		}
		if n < 15 || n > 16 || int64(n) != info.Sent {
			t.Errorf("%d records, %d sent; want the 15 due before the stop (16 if the one at 150ms came first)", n, info.Sent)
		}
		if w := info.Scheduled; w.To != 150*time.Millisecond {
			t.Errorf("scheduled window %+v ends at the stop", w)
		}

		// Stopped before it starts: nothing is sent.
		r, _ = NewRunner(c, src(), Options{Stages: []Stage{{Rate: 100, Duration: 10 * time.Second}}})
		r.Stop(nil)
		out = make(chan *Record, 16)
		if info, _ := r.Run(context.Background(), out); info.Sent != 0 || info.Stopped == nil {
			t.Errorf("stopped before Run: sent %d, stopped %v", info.Sent, info.Stopped)
		}
	})
}

func TestValidateRejectsRunsThatMeasureNothing(t *testing.T) {
	t.Parallel()
	sec := time.Second
	ok := []Options{
		{Stages: []Stage{{Rate: 5, Duration: sec}}},
		{Stages: []Stage{{Rate: 0, Duration: sec}, {Rate: 5, Duration: sec}}, WarmupDuration: sec},
		{Closed: true, Stages: []Stage{{Concurrency: 1, Duration: sec}}},
		{Trace: true, Stages: []Stage{{Duration: sec}}},
		{Stages: []Stage{{Rate: 5, Duration: sec}}, Requests: 10, WarmupRequests: 9},
	}
	for i, o := range ok {
		if err := o.Validate(); err != nil {
			t.Errorf("ok case %d: %v", i, err)
		}
	}
	bad := []struct {
		o    Options
		want string
	}{
		{Options{}, "stages: none"},
		{Options{Stages: []Stage{{Rate: 0, Duration: 2 * sec}}}, "every stage's rate is 0"},
		{Options{Stages: []Stage{{Rate: 5, Duration: sec}, {Rate: 0, Duration: sec}}, WarmupDuration: sec}, "after the 1s warm-up is 0"},
		{Options{Stages: []Stage{{Rate: 5, Duration: 3 * sec}}, WarmupDuration: 10 * sec}, "warm-up: 10s is not shorter than the 3s schedule"},
		{Options{Closed: true, Stages: []Stage{{Concurrency: 2, Duration: 3 * sec}}, WarmupDuration: 3 * sec}, "nothing would be measured"},
		{Options{Stages: []Stage{{Rate: 5, Duration: sec}}, Requests: 10, WarmupRequests: 10}, "warm-up: 10 requests of 10"},
		{Options{Stages: []Stage{{Name: "x", Rate: 5}}}, "stage 1 (x): duration 0s"},
		{Options{Closed: true, Stages: []Stage{{Duration: sec}}}, "concurrency ≥ 1"},
		{Options{Stages: []Stage{{Rate: 5, Duration: sec}}, Arrival: "lognormal"}, "arrival: arrival process \"lognormal\""},
		{Options{Stages: []Stage{{Rate: 5, Duration: sec}}, Arrival: ArrivalGamma}, "burstiness"},
		{Options{Stages: []Stage{{Rate: -1, Duration: sec}}}, "not a non-negative number"},
	}
	for _, c := range bad {
		err := c.o.Validate()
		var oe *optionsError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an optionsError containing %q", c.o, err, c.want)
		}
		if _, err := NewRunner(&fakeClient{}, src(), c.o); err == nil {
			t.Errorf("NewRunner accepted %+v", c.o)
		}
	}
}

// The scheduled window starts at the end of warm-up, by duration or by
// count, and ends at the schedule's end, whatever the drain after it.
func TestScheduledWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 100 * time.Millisecond, tokens: 1}
		stages := []Stage{{Name: "a", Rate: 50, Duration: 200 * time.Millisecond}, {Name: "b", Rate: 50, Duration: 200 * time.Millisecond}}
		for _, tc := range []struct {
			name string
			o    Options
			from time.Duration
			a, b time.Duration
		}{
			{"none", Options{}, 0, 200 * time.Millisecond, 200 * time.Millisecond},
			{"duration", Options{WarmupDuration: 100 * time.Millisecond}, 100 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
			// 50/s: request 15 is due at 300 ms.
			{"count", Options{WarmupRequests: 15}, 300 * time.Millisecond, 0, 100 * time.Millisecond},
		} {
			tc.o.Stages = stages
			_, info := collect(t, context.Background(), c, src(), tc.o)
			if w := info.Scheduled; w.From != tc.from || w.To != 400*time.Millisecond {
				t.Errorf("%s: window %+v, want %v → 400ms", tc.name, w, tc.from)
			}
			if got := info.StageScheduled; got["a"] != tc.a || got["b"] != tc.b {
				t.Errorf("%s: stage shares %v", tc.name, got)
			}
		}
	})
}

func summarize(recs []*Record, info Info) *schema.Summary {
	m := NewMeasured()
	for _, r := range recs {
		m.Add(r)
	}
	return m.Summary(info, schema.SummaryMeta{})
}

// A generator that cannot keep up (one slot, a server slower than the
// arrival gap) is flagged: its requests go out later and later, and the
// lag is most of every figure.
func TestSelfCheckFlagsStarvedGenerator(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, tokens: 1}
		recs, info := collect(t, context.Background(), c, src(), Options{MaxInFlight: 1, Grace: -1,
			Stages: []Stage{{Rate: 400, Duration: 500 * time.Millisecond}}})
		s := summarize(recs, info)
		if !s.SelfCheck.Distorted || s.SelfCheck.Cause == "" {
			t.Fatalf("starved generator not flagged: %+v", s.SelfCheck)
		}
		if !strings.Contains(strings.Join(s.Warnings, "\n"), "schedule lag moved reported figures") {
			t.Errorf("warnings %q", s.Warnings)
		}
		if info.Host.WindowS <= 0 || info.Host.Cores != numCPU() {
			t.Errorf("host load not sampled over the sending window: %+v", info.Host)
		}
	})
}

// A healthy low-rate run with one late send (make demo: 45 requests, one
// outlier) is not flagged: the outlier sets the lag's p99, and no figure
// the sample resolves moves.
func TestSelfCheckIgnoresOneLateSend(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 100 * time.Millisecond, tokens: 2, itl: 5 * time.Millisecond,
			late: func(seq int64) time.Duration {
				if seq == 7 {
					return 40 * time.Millisecond
				}
				return 0
			}}
		recs, info := collect(t, context.Background(), c, src(), Options{
			Stages: []Stage{{Rate: 25, Duration: 1800 * time.Millisecond}}})
		s := summarize(recs, info)
		if len(recs) != 45 || s.SelfCheck.LagSamples != 45 {
			t.Fatalf("%d records, %d lag samples", len(recs), s.SelfCheck.LagSamples)
		}
		if s.SelfCheck.Distorted || s.LatencyMs["schedule_lag"].P99 < 40 {
			t.Errorf("self-check %+v, lag %+v", s.SelfCheck, s.LatencyMs["schedule_lag"])
		}
		// Rates: 45 due and sent over the 1.8 s schedule; completions over the
		// measured window, which adds the last answer's ~105 ms.
		if tp := s.Throughput; math.Abs(tp.OfferedPerS-25) > 1e-9 || math.Abs(tp.SentPerS-25) > 1e-9 ||
			tp.MeasuredWindowS < 1.8 || tp.RequestsPerS > 25 || tp.RequestsPerS < 20 {
			t.Errorf("throughput %+v", tp)
		}
	})
}

// In closed loop a request count ends the schedule for every worker:
// those idle until a later stage do not hold the run until it comes.
func TestClosedLoopRequestCountEndsIdleWorkers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, tokens: 1}
		start := time.Now()
		recs, _ := collect(t, context.Background(), c, src(), Options{Closed: true, Requests: 5,
			Stages: []Stage{{Concurrency: 1, Duration: 10 * time.Second}, {Concurrency: 4, Duration: time.Second}}})
		if el := time.Since(start); el != 25*time.Millisecond {
			t.Errorf("run took %v, want 5 × 5ms; idle workers waited for stage 2", el)
		}
		if len(recs) != 5 {
			t.Errorf("%d records, want 5", len(recs))
		}
	})
}

// An interrupt while the run drops what it could not start stops the
// dropping at once (it used to go on through every arrival left: 25 GB of
// dropped lines for --rate 1e9, deaf to the first Ctrl-C).
func TestInterruptStopsDropping(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: time.Hour, tokens: 1}
		r, err := NewRunner(c, src(), Options{MaxInFlight: 1, Timeout: 2 * time.Hour, Grace: -1,
			Stages: []Stage{{Rate: maxRatePerS, Duration: 300 * time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := make(chan *Record, 16)
		done := make(chan Info)
		go func() {
			info, _ := r.Run(ctx, out)
			done <- info
		}()
		dropped := 0
		for rec := range out {
			if rec.ErrorKind == ErrDropped {
				dropped++
				if dropped == 1 {
					cancel() // Ctrl-C as the first dropped record arrives
				}
			}
		}
		info := <-done
		// 30,000 arrivals were due; once interrupted, at most the channel's
		// buffer and the one in hand more are dropped.
		if dropped == 0 || dropped > 100 || info.Dropped != int64(dropped) || !info.Interrupted {
			t.Errorf("dropped %d records (info %d, interrupted %v) of 30000 due: the interrupt did not stop the dropping", dropped, info.Dropped, info.Interrupted)
		}
	})
}

func TestRateAboveOneGeneratorIsRefused(t *testing.T) {
	t.Parallel()
	err := Options{Stages: []Stage{{Name: "main", Rate: 1e9, Duration: time.Second}}}.Validate()
	var oe *optionsError
	var fe *field.Error
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "rate 1e+09/s is above 100000/s") ||
		!errors.As(err, &fe) || fe.Field != "Shard" || !strings.Contains(err.Error(), "shard I/N") {
		t.Errorf("--rate 1e9: %v", err)
	}
	if err := (Options{Stages: []Stage{{Rate: maxRatePerS, Duration: time.Second}}}).Validate(); err != nil {
		t.Errorf("the bound itself: %v", err)
	}
}

// traceSource replays prompts at fixed offsets, then ends.
type traceSource struct{ at []time.Duration }

func (s *traceSource) Next() (*prompts.Prompt, error) {
	if len(s.at) == 0 {
		return nil, io.EOF
	}
	p := &prompts.Prompt{ID: "t", At: s.at[0]}
	s.at = s.at[1:]
	return p, nil
}

// Trace replay sends each prompt at its own At, exactly, and ends at the
// first one past the stages' end.
func TestTraceReplaySendsAtEachPromptsOffset(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: time.Millisecond, tokens: 1}
		at := []time.Duration{0, 3 * time.Millisecond, 3 * time.Millisecond, 250 * time.Millisecond, 400 * time.Millisecond, 450 * time.Millisecond}
		recs, info := collect(t, context.Background(), c, &traceSource{at: at}, Options{Trace: true,
			Stages: []Stage{{Name: "t", Duration: 300 * time.Millisecond}}})
		if len(recs) != 4 || info.Sent != 4 {
			t.Fatalf("%d records, %d sent; want the 4 due before 300ms", len(recs), info.Sent)
		}
		for i, r := range recs {
			if r.Intended != at[i] || r.ScheduleLag() != 0 {
				t.Errorf("record %d: intended %v (want %v), lag %v", i, r.Intended, at[i], r.ScheduleLag())
			}
		}
		if info.Scheduled.To != 300*time.Millisecond {
			t.Errorf("scheduled window %+v, want to the stages' end", info.Scheduled)
		}
	})
}

// An interrupt with no grace (the canary's shutdown) cancels the requests
// in flight: they are ErrCancelled, never cut at the end.
func TestInterruptWithoutGraceCancelsNotCuts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: time.Hour, tokens: 1}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(35*time.Millisecond, cancel)
		recs, info := collect(t, ctx, c, src(), Options{Grace: -1, Timeout: 2 * time.Hour,
			Stages: []Stage{{Rate: 100, Duration: time.Hour}}})
		if k := kinds(recs); k[ErrCancelled] != 4 || len(recs) != 4 || info.CutAtEnd != 0 || !info.Interrupted {
			t.Fatalf("kinds %v, cut %d, interrupted %v; want 4 cancelled", k, info.CutAtEnd, info.Interrupted)
		}
	})
}

// Sending that ended on an interrupt or Stop does not arm the cut: the
// interrupt's own cancellation reaches the requests, a moment later on
// another goroutine, and a cut timer re-armed for "now" used to beat it
// (the canary counted the probes it cancelled at shutdown as cut_at_end
// failures). A fake clock cannot show that race (its timers fire only
// once every goroutine waits), so this checks the timer itself.
func TestEndSendingOnInterruptDoesNotCut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r, err := NewRunner(&fakeClient{}, src(), Options{Grace: -1, Stages: []Stage{{Rate: 1, Duration: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		send, interrupt := context.WithCancel(context.Background())
		interrupt()
		rn := &run{epoch: time.Now(), end: time.Hour, ended: make(chan struct{}), send: send}
		rn.req, rn.cancelReqs = context.WithCancelCause(context.Background())
		defer rn.cancelReqs(nil)
		rn.cutTimer = time.AfterFunc(rn.end+r.grace, func() { rn.cancelReqs(errCutAtEnd) })
		defer rn.cutTimer.Stop()
		r.endSending(rn, time.Millisecond)
		time.Sleep(time.Second)
		if cause := context.Cause(rn.req); cause != nil {
			t.Errorf("requests ended by %v after an interrupt, before the interrupt's own cancellation", cause)
		}
	})
}
