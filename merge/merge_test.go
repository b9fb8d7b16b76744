package merge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
)

// client answers at once with a stream whose gaps depend on the request,
// so every shard's histograms differ.
var client = loadgen.ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
	rec.Sent = rec.Now()
	base := rec.Now() + time.Duration(1+rec.Seq%7)*time.Millisecond
	for i := 0; i < 4; i++ {
		rec.Chunks = append(rec.Chunks, loadgen.Chunk{At: base + time.Duration(i)*time.Duration(100+rec.Seq%13)*time.Microsecond, Tokens: 1})
	}
	rec.OutputTokens, rec.End = 4, base+time.Millisecond
	if rec.Seq%17 == 5 {
		rec.ErrorKind, rec.Chunks = loadgen.ErrServer, nil
	}
})

type source struct{ n int }

func (s *source) Next() (*prompts.Prompt, error) {
	s.n++
	return &prompts.Prompt{ID: fmt.Sprint(s.n), Class: []string{"a", "b", "c"}[s.n*7%3], Text: "x"}, nil
}

// lenient holds shards to no error limit and the self-check to a warning:
// the merge is under test, not the machine.
var lenient = slo.Validity{MaxErrorRate: slo.MustDecimal("100%"), MaxDropped: slo.MustDecimal("1%"),
	MaxCutAtEnd: slo.MustDecimal("100%"), MaxDistortion: slo.MustDecimal("10%"), DistortionWarns: true}

// plan is the length plan every test run records.
var plan = &prompts.LengthPlan{Classes: []prompts.ClassLengths{{Class: "a", Share: 1, InputTokens: &prompts.LengthDist{Dist: prompts.DistFixed, Value: new(1.0)}}}}

func runDir(t *testing.T, dir string, shard loadgen.Shard, start time.Time, seed uint64, form results.RecordsForm, comp results.Compression) {
	t.Helper()
	spec := pipeline.Spec{Client: client, Source: &source{}, Out: results.Dir(dir), Validity: &lenient,
		Records: form, RecordsCompression: comp, PlannedLengths: plan,
		Options: loadgen.Options{Stages: []loadgen.Stage{{Name: "s1", Rate: 200, Duration: 300 * time.Millisecond}, {Name: "s2", Rate: 400, Duration: 200 * time.Millisecond}},
			Arrival: loadgen.ArrivalPoisson, Seed: seed, Shard: shard, StartAt: start}}
	spec.Meta = schema.SummaryMeta{Target: "http://t", Model: "m", Load: spec.Options.Describe()}
	if _, err := pipeline.Run(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
}

// Merged shards are the single run's schedule, and the merged summary's
// histograms are exactly those of the merged records, whatever form each
// shard kept.
func TestMergeIsTheWhole(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	single := filepath.Join(base, "single")
	runDir(t, single, loadgen.Shard{}, time.Time{}, 9, results.RecordsFull, results.CompressNone)
	start := time.Now().Add(100 * time.Millisecond)
	var dirs []results.Dir
	var wg sync.WaitGroup
	forms := []results.RecordsForm{results.RecordsFull, results.RecordsFull, results.RecordsFull}
	comps := []results.Compression{results.CompressNone, results.CompressZstd, results.CompressGzip}
	for i := 0; i < 3; i++ {
		d := filepath.Join(base, fmt.Sprint("s", i))
		dirs = append(dirs, results.Dir(d))
		wg.Add(1)
		go func() {
			defer wg.Done()
			runDir(t, d, loadgen.Shard{Index: i, Count: 3}, start, 9, forms[i], comps[i])
		}()
	}
	wg.Wait()
	out := results.Dir(filepath.Join(base, "merged"))
	res, err := Merge(dirs, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := results.Dir(single).ReadSummary()
	got := res.Summary
	// The self-check's readings are the busiest shard's, as that shard saw
	// them (not the merging machine's).
	var busiest selfcheck.HostLoad
	idx := -1
	for i, d := range dirs {
		s, err := d.ReadSummary()
		if err != nil {
			t.Fatal(err)
		}
		if h := s.SelfCheck.Host; idx < 0 || h.OwnCores/float64(h.Cores) > busiest.OwnCores/float64(busiest.Cores) {
			busiest, idx = h, i
		}
	}
	if h := got.SelfCheck.Host; busiest.WindowS > 0 && (h.OwnCores != busiest.OwnCores || h.WindowS != busiest.WindowS ||
		h.Cores != busiest.Cores || !strings.HasPrefix(h.Source, fmt.Sprintf("shard %d, the busiest generator: ", idx))) {
		t.Errorf("merged self-check host %+v, busiest shard's (%d) %+v", h, idx, busiest)
	}
	if got.Requests.Sent != want.Requests.Sent || got.Requests.Errors != want.Requests.Errors || len(got.Classes) != len(want.Classes) {
		t.Fatalf("merged sent %d errors %d classes %d; single %d %d %d", got.Requests.Sent, got.Requests.Errors, len(got.Classes),
			want.Requests.Sent, want.Requests.Errors, len(want.Classes))
	}
	if lp := got.PlannedLengths; lp == nil || len(lp.Classes) != 1 || *lp.Classes[0].InputTokens.Value != 1 {
		t.Errorf("merged planned_lengths %+v, want the shards'", lp)
	}
	for c, cs := range want.Classes {
		if got.Classes[c].Requests.Sent != cs.Requests.Sent {
			t.Errorf("class %s: merged %d, single %d", c, got.Classes[c].Requests.Sent, cs.Requests.Sent)
		}
	}
	m := measure.NewMetrics()
	var seqs []int64
	results.ReadRecords(out.RecordsPath(), func(r *loadgen.Record) error {
		cp := *r
		m.Add(&cp)
		seqs = append(seqs, r.Seq)
		return nil
	})
	if int64(len(seqs)) != want.Requests.Sent {
		t.Fatalf("merged records: %d, single sent %d", len(seqs), want.Requests.Sent)
	}
	for _, n := range measure.MetricNames() {
		if g, w := got.LatencyMs[n], schema.HistOf(m.All.Hist[n]); g != w {
			t.Errorf("%s: merged summary %+v, merged records %+v", n, g, w)
		}
		for st := range want.Stages {
			if g, w := got.Stages[st].LatencyMs[n], schema.HistOf(m.Stages[st].Hist[n]); g != w {
				t.Errorf("stage %s %s: merged summary %+v, merged records %+v", st, n, g, w)
			}
		}
	}
}

// Merge names every reason it refuses.
func TestMergeRefuses(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	mk := func(name string, shard loadgen.Shard, seed uint64) results.Dir {
		d := filepath.Join(base, name)
		runDir(t, d, shard, time.Time{}, seed, results.RecordsNone, results.CompressNone)
		return results.Dir(d)
	}
	a, b, c := mk("a", loadgen.Shard{Index: 0, Count: 3}, 1), mk("b", loadgen.Shard{Index: 1, Count: 3}, 1), mk("c", loadgen.Shard{Index: 2, Count: 3}, 2)
	four := mk("four", loadgen.Shard{Index: 2, Count: 4}, 1)
	for _, tc := range []struct {
		dirs []results.Dir
		says []string
	}{
		{[]results.Dir{a, b}, []string{"shards 2 of 3 missing"}},
		{[]results.Dir{a, a, b}, []string{"shard 0/3 given 2 times (overlapping): " + string(a) + ", " + string(a)}},
		{[]results.Dir{a, b, c}, []string{"shard 2/3 (" + string(c) + ") is not a shard of the schedule of shard 0/3 (" + string(a) + ")", `load.seed "2" ≠ "1"`}},
		{[]results.Dir{a, b, four}, []string{`shards "4" ≠ "3"`}},
		{[]results.Dir{a, results.Dir(base)}, []string{base + ": no histograms.json"}},
	} {
		_, err := Merge(tc.dirs, results.Dir(filepath.Join(base, "out")), Options{})
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("%v: %v, want a refusal", tc.dirs, err)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%v: the refusal does not say %q:\n%v", tc.dirs, s, err)
			}
		}
	}
}

// Shards judged against an SLO and merged without one: the merge says the
// merged run has no verdict (a failed shard must not read as a merge that
// passed); merged with shards that were not judged, it says nothing.
func TestMergeSaysUnjudged(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	var dirs []results.Dir
	for i := 0; i < 2; i++ {
		d := results.Dir(filepath.Join(base, fmt.Sprint("s", i)))
		runDir(t, string(d), loadgen.Shard{Index: i, Count: 2}, time.Time{}, 3, results.RecordsFull, results.CompressNone)
		dirs = append(dirs, d)
	}
	for _, judged := range []bool{false, true} {
		if judged {
			for i, d := range dirs {
				s, err := d.ReadSummary()
				if err != nil {
					t.Fatal(err)
				}
				s.SLO = &slo.Report{SLO: "chat-28d", Status: []string{"FAIL", "PASS"}[i]}
				if err := d.WriteSummary(s); err != nil {
					t.Fatal(err)
				}
			}
		}
		out := results.Dir(filepath.Join(base, fmt.Sprint("merged-", judged)))
		res, err := Merge(dirs, out, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := `the shards were judged against the SLO "chat-28d" (shard 0 FAIL, shard 1 PASS); the merged run has no verdict: merge with --slo FILE, or run tailgate check --slo FILE ` + string(out)
		saved, _ := out.ReadSummary()
		said := slices.Contains(res.Summary.Warnings, want) && slices.Contains(saved.Warnings, want)
		if said != judged {
			t.Errorf("shards judged %v: warnings %q, saved %q", judged, res.Summary.Warnings, saved.Warnings)
		}
	}
}
