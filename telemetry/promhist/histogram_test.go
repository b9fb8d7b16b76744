package promhist

import (
	"encoding/json"
	"math"
	"testing"
)

// TestAtRankIsQuantile: Quantile is AtRank at q·Count, and AtRank's bucket
// is the one holding the rank-th observation (nearest rank), the +Inf
// bucket's lower bound the highest finite bound.
func TestAtRankIsQuantile(t *testing.T) {
	inf := math.Inf(1)
	h := Histogram{Count: 50, Buckets: []Bucket{{0.1, 10}, {0.5, 30}, {1, 40}, {inf, 50}}}
	for _, c := range []struct {
		rank      float64
		low, high float64
	}{{1, 0, 0.1}, {10, 0, 0.1}, {11, 0.1, 0.5}, {30, 0.1, 0.5}, {31, 0.5, 1}, {41, 1, inf}, {50, 1, inf}} {
		e, ok := h.AtRank(c.rank)
		if !ok || e.Lower != c.low || e.Upper != c.high {
			t.Errorf("rank %v: %+v %v, want (%v, %v]", c.rank, e, ok, c.low, c.high)
		}
		q, _ := h.Quantile(c.rank / 50)
		if q != e {
			t.Errorf("rank %v: Quantile %+v, AtRank %+v", c.rank, q, e)
		}
	}
	if _, ok := (Histogram{Buckets: []Bucket{{inf, 3}}, Count: 3}).AtRank(1); ok {
		t.Error("a mean-only histogram has no ranks")
	}
}

func TestBucketJSONForms(t *testing.T) {
	var bs []Bucket
	if err := json.Unmarshal([]byte(`[{"le":0.25,"count":3},{"le_s":0.5,"count":5},{"le_s":null,"count":7},{"le":"+Inf","count":7}]`), &bs); err != nil {
		t.Fatal(err)
	}
	want := []Bucket{{0.25, 3}, {0.5, 5}, {math.Inf(1), 7}, {math.Inf(1), 7}}
	for i := range want {
		if bs[i] != want[i] {
			t.Errorf("bucket %d: %+v, want %+v", i, bs[i], want[i])
		}
	}
	b, _ := json.Marshal(bs[1:3])
	if string(b) != `[{"le":0.5,"count":5},{"le":"+Inf","count":7}]` {
		t.Errorf("written as %s", b)
	}
}
