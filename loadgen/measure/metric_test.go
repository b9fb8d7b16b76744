package measure

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// TestUnstreamedGivesNoStreamMetrics: an answer that came as one body has a
// TTFT and an E2E but no ICL, ITL or TPOT, in the histograms as in the
// table (today's --stream=false gave TPOT 0 µs).
func TestUnstreamedGivesNoStreamMetrics(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	r := &loadgen.Record{Intended: 0, Sent: ms, End: 300 * ms, OutputTokens: 50, Unstreamed: true,
		Chunks: []loadgen.Chunk{{At: 300 * ms, Tokens: 50}}}
	r.Finalize()
	m.Add(r)
	s := m.Summary(loadgen.Info{}, schema.SummaryMeta{})
	for name, want := range map[string]int64{MetricTTFT: 1, MetricE2E: 1, MetricScheduleLag: 1, MetricTPOT: 0, MetricITL: 0, MetricICL: 0} {
		if got := s.LatencyMs[name].Count; got != want {
			t.Errorf("%s: %d samples, want %d", name, got, want)
		}
	}
	if _, ok := FindLatencyMetric(MetricTPOT).Of(r); ok {
		t.Error("TPOT of an unstreamed answer")
	}
	r.Unstreamed = false
	if d, ok := FindLatencyMetric(MetricTPOT).Of(r); !ok || d != 0 {
		t.Errorf("streamed, one chunk: TPOT %v %v", d, ok)
	}
}

// TestSamplesTruncateInstants: the table truncates every instant to the
// microsecond before subtracting, so a record with nanosecond instants and
// its requests.jsonl copy give the same samples, and the same histograms.
func TestSamplesTruncateInstants(t *testing.T) {
	t.Parallel()
	live := &loadgen.Record{Intended: 1999, Sent: 3001, FirstAnswer: 5*ms + 999, End: 20*ms + 1,
		Chunks: []loadgen.Chunk{{At: 2*ms + 500, Tokens: 1}, {At: 5*ms + 999, Tokens: 3}, {At: 9*ms + 1, Tokens: 2}}, OutputTokens: 6}
	b, err := json.Marshal(live)
	if err != nil {
		t.Fatal(err)
	}
	saved := &loadgen.Record{}
	if err := json.Unmarshal(b, saved); err != nil {
		t.Fatal(err)
	}
	samples := func(r *loadgen.Record) map[string][][2]int64 {
		out := map[string][][2]int64{}
		for i := range latencyMetricsTable {
			m := &latencyMetricsTable[i]
			for s := m.Samples(r); s.Next(); {
				out[m.Name] = append(out[m.Name], [2]int64{int64(s.Value()), int64(s.Weight())})
			}
		}
		return out
	}
	a, c := samples(live), samples(saved)
	if !reflect.DeepEqual(a, c) {
		t.Errorf("live %v\nsaved %v", a, c)
	}
	// TTFT: 2.000 ms − 0.001 ms (instants truncated) = 1.999 ms; the raw
	// difference, 1.998501 ms, would go into the histogram as 1.998 ms.
	if got := a[MetricTTFT][0][0]; got != int64(1999*time.Microsecond) {
		t.Errorf("ttft %v", time.Duration(got))
	}
	// ITL: (9.000 − 5.000) ms over 2 tokens, counted twice (raw: 1.999501
	// ms each).
	if got := a[MetricITL][1]; got != [2]int64{int64(2 * ms), 2} {
		t.Errorf("itl %v", got)
	}
	ml, msv := NewMetrics(), NewMetrics()
	ml.Add(live)
	msv.Add(saved)
	for _, n := range metricNamesTable {
		if !ml.All.Hist[n].Equals(msv.All.Hist[n]) {
			t.Errorf("%s: live and saved histograms differ", n)
		}
	}
}

// TestFailedRecordHasNoSamples: latencies are of successful requests only.
func TestFailedRecordHasNoSamples(t *testing.T) {
	t.Parallel()
	r := &loadgen.Record{End: 5 * ms, ErrorKind: loadgen.ErrStreamTruncated, Chunks: []loadgen.Chunk{{At: ms, Tokens: 1}, {At: 2 * ms, Tokens: 1}}, OutputTokens: 2}
	for i := range latencyMetricsTable {
		if s := latencyMetricsTable[i].Samples(r); s.Next() {
			t.Errorf("%s: a sample from a failed record", latencyMetricsTable[i].Name)
		}
	}
}

// Every percentile a row's Columns ask for is one summary.json has.
func TestColumnsArePercentilesOfHist(t *testing.T) {
	t.Parallel()
	for _, m := range LatencyMetrics() {
		for table, qs := range m.Columns {
			for _, q := range qs {
				func() {
					defer func() {
						if recover() != nil {
							t.Errorf("%s in %s: p%g is not a summary.json percentile", m.Name, table, 100*q)
						}
					}()
					schema.Hist{}.Quantile(q)
				}()
			}
		}
	}
}
