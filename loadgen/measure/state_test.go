package measure

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// Metrics taken apart (a state through JSON, as histograms.json holds it)
// and merged are the metrics of every record together: the same
// histograms, counts and windows, class by class and stage by stage.
func TestStateMergeIsLossless(t *testing.T) {
	t.Parallel()
	// A floor and a ratio made outside the table travel in the state too.
	rows := []RateMetric{
		NewRateMetric(RateMetric{Name: "total_tokens_per_s"}, func(r *loadgen.Record) int64 { return int64(r.InputTokens + r.OutputTokens) }),
		NewRatioMetric(RateMetric{Name: "odd_rate"}, func(r *loadgen.Record) (counted, bad bool) { return r.OK(), r.Seq%2 == 1 }),
	}
	all, parts := NewMetrics().WithRates(rows), []*Metrics{NewMetrics().WithRates(rows), NewMetrics().WithRates(rows), NewMetrics().WithRates(rows)}
	for i := 0; i < 600; i++ {
		start := time.Duration(i) * 7 * time.Millisecond
		r := &loadgen.Record{Seq: int64(i), Class: []string{"a", "b"}[i%2], Stage: []string{"s1", "s2"}[i/300], Intended: start,
			Sent: start + time.Duration(i%13)*time.Microsecond, OutputTokens: 3, InputTokens: i % 17, TokenSource: loadgen.TokensFromUsage, Warmup: i < 5}
		for j := 0; j < 3; j++ {
			r.Chunks = append(r.Chunks, loadgen.Chunk{At: start + time.Duration(20+i%97+j*(3+i%5))*time.Millisecond, Tokens: 1})
		}
		r.End = r.Chunks[2].At + time.Millisecond
		if i%41 == 0 {
			r.ErrorKind, r.Error = loadgen.ErrServer, "HTTP 500: engine died at "+strconv.Itoa(i)
		}
		all.Add(r)
		parts[i%3].Add(r)
	}
	merged := NewMetrics().WithRates(rows)
	for _, p := range parts {
		st, err := p.State()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(st)
		var back schema.MetricsState
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		m, err := MetricsFromState(&back)
		if err != nil {
			t.Fatal(err)
		}
		merged.Merge(m, 0)
	}
	info := loadgen.Info{Started: time.Unix(0, 0), Elapsed: 5 * time.Second, Scheduled: loadgen.Window{From: 0, To: 4 * time.Second}}
	got, want := merged.Summary(info, schema.SummaryMeta{}), all.Summary(info, schema.SummaryMeta{})
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("merged summary differs from the whole:\n got %s\nwant %s", gb, wb)
	}
	if got.LatencyMs[MetricTTFT].Count == 0 || len(got.Classes) != 2 || len(got.Stages) != 2 {
		t.Fatalf("nothing compared: %+v", got.LatencyMs[MetricTTFT])
	}
	if x := got.Throughput.Extra; x["total_tokens_per_s"] <= 0 || x["odd_rate"] <= 0 || x["odd_rate"] >= 1 {
		t.Fatalf("the made-up rates did not survive the merge: %v", x)
	}
	// The first error is the earliest intended, whichever shard held it.
	if first := got.Requests.FirstErrors[string(loadgen.ErrServer)]; first != "request 41: HTTP 500: engine died at 41" {
		t.Errorf("first server_error %q, want request 41's", first)
	}
}
