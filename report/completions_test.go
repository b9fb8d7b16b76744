package report

import (
	"testing"
	"time"
)

// Completions at one a second through two parts, the first part's last
// three ending in the last 50 ms of its span and in its drain after it:
// counted where they end over whole buckets, the rate never reads as a
// burst at the boundary (bucketing each part on its own put them in a
// 50 ms bucket: 60/s).
func TestCompletionsHaveNoBoundarySpike(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	var first, second []req
	for i := range 10 {
		first = append(first, req{ok: true, e2e: 1, end: time.Duration(i)*time.Second + 500*ms})
	}
	first = append(first, req{ok: true, e2e: 1, end: 10020 * ms}, req{ok: true, e2e: 1, end: 10040 * ms}, req{ok: true, e2e: 1, end: 10300 * ms})
	for i := range 10 {
		second = append(second, req{ok: true, e2e: 1, end: 10500*ms + time.Duration(i)*time.Second + 500*ms})
	}
	src := &Source{Parts: []*Part{
		{Name: "a", Offset: 0, Span: 10050 * ms, Reqs: first},
		{Name: "b", Offset: 10500 * ms, Span: 10 * time.Second, Reqs: second},
	}}
	xys := completions(src, time.Second)
	total := 0.0
	for i, p := range xys {
		if p.Y > 3.5 {
			t.Errorf("bucket %d at %.2fs: %.1f completions/s, a spike where the rate is about 1/s", i, p.X, p.Y)
		}
		w := time.Second.Seconds()
		if i == len(xys)-1 {
			w = 2 * (p.X - float64(i))
		}
		total += p.Y * w
	}
	if n := len(first) + len(second); int(total+0.5) != n {
		t.Errorf("the buckets hold %.1f completions, want %d", total, n)
	}
	if got := completions(&Source{}, time.Second); got != nil {
		t.Errorf("no requests: %v", got)
	}
}
