package loadgen

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// fakeClient answers after a delay computed from the send instant, with
// tokens evenly spaced: a server whose delays are known exactly.
type fakeClient struct {
	ttft, itl time.Duration
	tokens    int
	// hold, if set, returns how long the server is frozen when a request
	// arrives at offset t (a stall); the whole response shifts by it.
	hold     func(t time.Duration) time.Duration
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
		rec.Chunks = append(rec.Chunks, Chunk{At: rec.Now(), Tokens: 1})
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
			rec.Finalize()
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

func TestOpenLoopSendsOnSchedule(t *testing.T) {
	c := &fakeClient{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 3}
	recs, info := collect(t, context.Background(), c, src(), Options{Stages: []Stage{{Name: "s", Rate: 100, Duration: time.Second}}})
	if len(recs) != 100 || info.Sent != 100 {
		t.Fatalf("got %d records, %d sent; want 100", len(recs), info.Sent)
	}
	for i, r := range recs {
		if r.Intended != time.Duration(i)*10*time.Millisecond {
			t.Fatalf("record %d intended %v", i, r.Intended)
		}
		if lag := r.ScheduleLag(); lag < 0 || lag > 50*time.Millisecond {
			t.Errorf("record %d schedule lag %v", i, lag)
		}
		if !r.OK() || r.OutputTokens != 3 || r.Stage != "s" {
			t.Fatalf("record %d: %+v", i, r)
		}
		if ttft, _ := r.TTFT(); ttft < 5*time.Millisecond {
			t.Errorf("record %d TTFT %v below the server's 5ms", i, ttft)
		}
	}
}

// With a server frozen for 500 ms, open-loop latencies measured from the
// intended start must include the time each request waited for the
// freeze to end, even when the cap forces requests to start late.
func TestOpenLoopCountsStallFromIntendedStart(t *testing.T) {
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
}

func TestClosedLoopHoldsConcurrency(t *testing.T) {
	c := &fakeClient{ttft: 10 * time.Millisecond, tokens: 1}
	recs, _ := collect(t, context.Background(), c, src(), Options{Closed: true,
		Stages: []Stage{{Concurrency: 4, Duration: 500 * time.Millisecond}}})
	if m := c.maxSeen.Load(); m != 4 {
		t.Errorf("max in flight %d, want 4", m)
	}
	// 4 workers × ~10 ms per request over 0.5 s ≈ 200.
	if len(recs) < 120 || len(recs) > 210 {
		t.Errorf("%d requests, want ~200", len(recs))
	}
	for _, r := range recs {
		if lag := r.ScheduleLag(); lag > 5*time.Millisecond {
			t.Fatalf("closed loop: intended start should be the send, lag %v", lag)
		}
	}
}

func TestDroppedWhenCapNeverFrees(t *testing.T) {
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
}

func TestInterruptCancelsInFlight(t *testing.T) {
	c := &fakeClient{ttft: 10 * time.Second, tokens: 1}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	start := time.Now()
	recs, info := collect(t, ctx, c, src(), Options{Stages: []Stage{{Rate: 100, Duration: 10 * time.Second}}})
	if time.Since(start) > 2*time.Second {
		t.Fatalf("run took %v after interrupt", time.Since(start))
	}
	if !info.Interrupted {
		t.Error("Info.Interrupted false")
	}
	if len(recs) < 10 || int64(len(recs)) != info.Sent {
		t.Fatalf("%d records for %d sent", len(recs), info.Sent)
	}
	for _, r := range recs {
		if r.ErrorKind != ErrCancelled {
			t.Fatalf("in-flight record kind %q, want cancelled", r.ErrorKind)
		}
	}
}

func TestTimeoutPerRequest(t *testing.T) {
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
}

func TestWarmupMarking(t *testing.T) {
	c := &fakeClient{tokens: 1}
	recs, _ := collect(t, context.Background(), c, src(), Options{WarmupRequests: 5,
		Stages: []Stage{{Rate: 100, Duration: 200 * time.Millisecond}}})
	for _, r := range recs {
		if r.Warmup != (r.Seq < 5) {
			t.Errorf("seq %d warmup %v", r.Seq, r.Warmup)
		}
	}
	m := NewMetrics()
	for _, r := range recs {
		m.Add(r)
	}
	if m.Warmup != 5 || m.All.Sent != 15 {
		t.Errorf("metrics: warmup %d sent %d", m.Warmup, m.All.Sent)
	}
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
	c := &fakeClient{ttft: 5 * time.Millisecond, tokens: 1}
	recs, _ := collect(t, context.Background(), c, &sessionSource{}, Options{KeepText: true,
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
}

// An interrupt does not wait for sessions' pending turns to come due.
func TestInterruptDoesNotWaitForThinkTime(t *testing.T) {
	c := &fakeClient{ttft: time.Millisecond, tokens: 1}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	src := &longThink{}
	collect(t, ctx, c, src, Options{KeepText: true, Stages: []Stage{{Rate: 50, Duration: time.Minute}}})
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Run returned %v after start; pending 30 s think times held it", el)
	}
}

type longThink struct{}

func (longThink) Next() (*prompts.Prompt, error) {
	p := &prompts.Prompt{Session: "s", Text: "q"}
	p.FollowUp = func(string) *prompts.Prompt { return &prompts.Prompt{Session: "s", Turn: 1, Think: 30 * time.Second} }
	return p, nil
}
