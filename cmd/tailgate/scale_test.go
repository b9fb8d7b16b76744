package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
)

// tgProcess runs the test binary as tailgate in its own process (see
// TestMain): shards are separate processes, as on separate machines.
func tgProcess(args ...string) (int, string) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TAILGATE_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

// scheduled is what the schedule decides about a request: which it is,
// what it sends, when it is due.
type scheduled struct {
	seq             int64
	id, class, st   string
	intended        time.Duration
	requestedTokens int
}

func readScheduled(t *testing.T, dir string) []scheduled {
	t.Helper()
	var out []scheduled
	_, err := results.ReadRecords(results.Dir(dir).RecordsPath(), func(r *loadgen.Record) error {
		out = append(out, scheduled{r.Seq, r.ID, r.Class, r.Stage, r.Intended, r.RequestedInputTokens})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// N shards (N = 1, 3, 4), each a separate process started together with
// --start-at, merged, are the single-process run: the same requests (seq,
// prompt, class, stage, intended start, to the microsecond), the same
// counts and class split; and the merged summary's histograms are exactly
// those of the merged records (HDR merges lose nothing).
func TestShardedRunsMergeToTheSingleSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	base := t.TempDir()
	common := []string{"run", "--target", srv.URL, "--model", "sim-llama-8b", "--mix", "../../testdata/mixes/chat.yaml",
		"--stages", "20@700ms,50@700ms", "--ramp", "300ms", "--arrival", "poisson", "--seed", "5", "--warmup", "3",
		"--metrics-url", "off", "--nvml", "off", "--self-check", "warn", "--no-progress", "--grace", "10s"}
	single := filepath.Join(base, "single")
	if code, out := tgProcess(append(common, "--out", single)...); code != slo.ExitOK {
		t.Fatalf("single run: exit %d\n%s", code, out)
	}
	want := readScheduled(t, single)
	wantSum := readSummary(t, single)
	t.Logf("single process: %d requests, classes %v", len(want), func() map[string]int64 {
		m := map[string]int64{}
		for c, cs := range wantSum.Classes {
			m[c] = cs.Requests.Sent
		}
		return m
	}())
	if len(want) < 30 {
		t.Fatalf("single run sent %d requests: too few to compare", len(want))
	}
	for _, n := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			start := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
			dirs := make([]string, n)
			var wg sync.WaitGroup
			for i := range dirs {
				dirs[i] = filepath.Join(base, fmt.Sprintf("n%d-s%d", n, i))
				args := append(append([]string{}, common...), "--shard", fmt.Sprintf("%d/%d", i, n), "--start-at", start, "--out", dirs[i])
				if i%2 == 1 { // shards may keep their records in any form
					args = append(args, "--records", "full", "--records-compress", "zstd")
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if code, out := tgProcess(args...); code != slo.ExitOK {
						t.Errorf("shard %d/%d: exit %d\n%s", i, n, code, out)
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			for i, d := range dirs {
				s := readSummary(t, d)
				if s.Run.Shard == nil || s.Run.Shard.Index != i || s.Run.Shard.Count != n || s.Run.Shard.StartAt == "" {
					t.Errorf("shard %d: run.shard %+v", i, s.Run.Shard)
				} else if s.Run.Shard.LateByS > 0.5 {
					t.Errorf("shard %d started %.3fs late", i, s.Run.Shard.LateByS)
				}
			}
			merged := filepath.Join(base, fmt.Sprintf("merged%d", n))
			if code, out, errOut := tgCmd(append([]string{"merge", "--out", merged, "--records-compress", "none"}, dirs...)...); code != slo.ExitOK {
				t.Fatalf("merge: exit %d\n%s\n%s", code, out, errOut)
			}
			got := readScheduled(t, merged)
			if len(got) != len(want) {
				t.Fatalf("merged %d requests, single process %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("request %d: merged %+v, single %+v", i, got[i], want[i])
				}
			}
			sum := readSummary(t, merged)
			if sum.Requests.Sent != wantSum.Requests.Sent || sum.Requests.Warmup != wantSum.Requests.Warmup {
				t.Errorf("merged sent %d (warm-up %d), single %d (%d)", sum.Requests.Sent, sum.Requests.Warmup, wantSum.Requests.Sent, wantSum.Requests.Warmup)
			}
			for c, cs := range wantSum.Classes {
				if g := sum.Classes[c].Requests.Sent; g != cs.Requests.Sent {
					t.Errorf("class %s: merged %d requests, single %d", c, g, cs.Requests.Sent)
				}
			}
			if sum.Run.Merged == nil || sum.Run.Merged.Count != n || !sum.Validity.Valid {
				t.Errorf("run.merged %+v, validity %+v", sum.Run.Merged, sum.Validity)
			}
			// The merged histograms are those of every request together.
			m := measure.NewMetrics()
			results.ReadRecords(results.Dir(merged).RecordsPath(), func(r *loadgen.Record) error {
				cp := *r
				m.Add(&cp)
				return nil
			})
			for _, metric := range measure.MetricNames() {
				if g, w := sum.LatencyMs[metric], schema.HistOf(m.All.Hist[metric]); g != w {
					t.Errorf("%s: merged histogram %+v, from the merged records %+v", metric, g, w)
				}
				for c := range wantSum.Classes {
					if g, w := sum.Classes[c].LatencyMs[metric], schema.HistOf(m.Classes[c].Hist[metric]); g != w {
						t.Errorf("class %s %s: merged %+v, records %+v", c, metric, g, w)
					}
				}
			}
		})
	}
}

// merge refuses what is not one schedule's complete set of shards, and
// says which directories and why.
func TestMergeRefusesMismatchedShards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	base := t.TempDir()
	run := func(name, shard, seed string) string {
		d := filepath.Join(base, name)
		code, out := tgProcess("run", "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--arrival", "constant", "--duration", "300ms",
			"--max-tokens", "4", "--seed", seed, "--shard", shard, "--metrics-url", "off", "--nvml", "off", "--self-check", "warn",
			"--no-progress", "--records", "none", "--out", d)
		if code != slo.ExitOK {
			t.Fatalf("run %s: exit %d\n%s", shard, code, out)
		}
		return d
	}
	s0, s1, other := run("s0", "0/3", "1"), run("s1", "1/3", "1"), run("other", "2/3", "2")
	// A run that kept no records has nothing check can re-judge, and says why.
	sloFile := filepath.Join(base, "slo.yaml")
	os.WriteFile(sloFile, []byte(checkSLO), 0o644)
	if code, _, errOut := tgCmd("check", "--slo", sloFile, s0); code != slo.ExitUsage || !strings.Contains(errOut, "--records none") {
		t.Errorf("check on a run without records: exit %d\n%s", code, errOut)
	}
	for _, c := range []struct {
		dirs []string
		says []string
	}{
		{[]string{s0, s1}, []string{"shards 2 of 3 missing"}},
		{[]string{s0, s1, s1}, []string{"shard 1/3 given 2 times", s1, "shards 2 of 3 missing"}},
		{[]string{s0, s1, other}, []string{"shard 2/3 (" + other + ") is not a shard of the schedule of shard 0/3 (" + s0 + ")", `load.seed "2" ≠ "1"`}},
		{[]string{s0, filepath.Join(base)}, []string{base + ": no histograms.json"}},
	} {
		out := filepath.Join(base, "merged")
		code, _, errOut := tgCmd(append([]string{"merge", "--out", out}, c.dirs...)...)
		if code != slo.ExitUsage {
			t.Errorf("merge %v: exit %d, want %d\n%s", c.dirs, code, slo.ExitUsage, errOut)
		}
		for _, s := range c.says {
			if !strings.Contains(errOut, s) {
				t.Errorf("merge %v: the error does not say %q:\n%s", c.dirs, s, errOut)
			}
		}
		if _, err := os.Stat(filepath.Join(out, results.SummaryFile)); err == nil {
			t.Errorf("merge %v wrote a summary though it refused", c.dirs)
		}
	}
}

// A compact record file, compressed (zstd or gzip), round-trips through
// check with the same verdicts as the full one; an ICL objective, which
// compact records cannot judge, is NO_DATA there, never a pass.
func TestCompactRecordsJudgeAlike(t *testing.T) {
	at := "--at=2026-06-01T00:00:00Z"
	for _, slow := range []int{0, 9} { // a pass and a fail (400 requests a stage)
		sloFile, planFile, full := writeRun(t, liveRecords(slow, false))
		wantOut := filepath.Join(t.TempDir(), "want")
		wantCode, _, errOut := tgCmd("check", "--slo", sloFile, "--plan", planFile, at, "--out", wantOut, full)
		if wantCode != slo.ExitOK && wantCode != slo.ExitFailed {
			t.Fatalf("check full: exit %d\n%s", wantCode, errOut)
		}
		wantRep, err := results.Dir(wantOut).ReadReport()
		if err != nil {
			t.Fatal(err)
		}
		for _, comp := range []results.Compression{results.CompressZstd, results.CompressGzip} {
			dir := filepath.Join(t.TempDir(), "compact")
			os.MkdirAll(dir, 0o755)
			w, err := results.CreateRecordWriter(filepath.Join(dir, results.RecordsFileName(comp)), results.RecordsCompact, comp)
			if err != nil {
				t.Fatal(err)
			}
			results.ReadRecords(filepath.Join(full, results.RecordsFile), func(r *loadgen.Record) error { return w.Write(r) })
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(full, results.SummaryFile))
			os.WriteFile(filepath.Join(dir, results.SummaryFile), b, 0o644)
			out := filepath.Join(t.TempDir(), "got")
			code, _, errOut := tgCmd("check", "--slo", sloFile, "--plan", planFile, at, "--out", out, dir)
			if code != wantCode {
				t.Fatalf("%s compact: exit %d, full %d\n%s", comp, code, wantCode, errOut)
			}
			got, err := results.Dir(out).ReadReport()
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Verdicts) != len(wantRep.Verdicts) || len(got.Verdicts) == 0 {
				t.Fatalf("%s compact: %d verdicts, full %d", comp, len(got.Verdicts), len(wantRep.Verdicts))
			}
			for i := range got.Verdicts {
				g, w := got.Verdicts[i], wantRep.Verdicts[i]
				if g.Objective != w.Objective || g.Stage != w.Stage || g.Status != w.Status || g.Measured != w.Measured {
					t.Errorf("%s compact, slow=%d: %s/%s %s %v; full %s %v", comp, slow, g.Objective, g.Stage, g.Status, g.Measured, w.Status, w.Measured)
				}
			}
			// ICL needs every chunk: compact records cannot judge it.
			iclSLO := filepath.Join(t.TempDir(), "icl.yaml")
			os.WriteFile(iclSLO, []byte("kind: SLO\nname: icl\nowner: team\nobjectives:\n  - {name: icl-p99, metric: icl, threshold: 50ms, target: 99%}\n"), 0o644)
			if code, stdout, _ := tgCmd("check", "--slo", iclSLO, at, dir); code == slo.ExitOK || !strings.Contains(stdout, "NO_DATA") || !strings.Contains(stdout, "records are compact") {
				t.Errorf("%s compact: an ICL objective gave exit %d:\n%s", comp, code, stdout)
			}
		}
	}
}

// --preconnect opens the pool before the first intended start and the
// summary says so, with the set-up time apart; without it the summary says
// it was not used.
func TestPreconnectInSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	for _, pre := range []bool{false, true} {
		dir := t.TempDir()
		args := []string{"--target", srv.URL, "--model", "sim-llama-8b", "--concurrency", "6", "--duration", "400ms", "--max-tokens", "4",
			"--metrics-url", "off", "--nvml", "off", "--no-progress", "--out", dir}
		if pre {
			args = append(args, "--preconnect")
		}
		if code, out, errOut := runCmd(t, args...); code != slo.ExitOK {
			t.Fatalf("preconnect %v: exit %d\n%s\n%s", pre, code, out, errOut)
		}
		p := readSummary(t, dir).Run.Preconnect
		if p.Used != pre || (pre && (p.Connections != 6 || p.SetupMs <= 0 || p.Error != "")) {
			t.Errorf("--preconnect %v: run.preconnect %+v", pre, p)
		}
	}
}

// A sharded validate: three shards, separate processes, every stage
// started together (--start-at), merged into one evidence pack with one
// verdict — the same objectives and stages, the same request counts
// judged, as the single-process validate — and every shard's environment.
func TestShardedValidateMergesToOneVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	plan := writePlan(t, srv.URL, "1s", false)
	base := t.TempDir()
	common := []string{"validate", "--plan", plan, "--grace", "1s", "--metrics-url", "off", "--nvml", "off", "--no-progress", "--self-check", "warn"}
	single := filepath.Join(base, "single")
	if code, out := tgProcess(append(common, "--out", single)...); code != slo.ExitOK {
		t.Fatalf("single validate: exit %d\n%s", code, out)
	}
	start := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	var dirs []string
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		d := filepath.Join(base, fmt.Sprintf("shard-%d", i))
		dirs = append(dirs, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A shard judges a third of the requests: its own verdict may
			// be undecided (4); the merged one is the verdict.
			if code, out := tgProcess(append(common, "--shard", fmt.Sprintf("%d/3", i), "--start-at", start, "--out", d)...); code != slo.ExitOK && code != slo.ExitInconclusive {
				t.Errorf("shard %d: exit %d\n%s", i, code, out)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	merged := filepath.Join(base, "merged")
	code, stdout, stderr := tgCmd(append([]string{"merge", "--out", merged}, dirs...)...)
	if code != slo.ExitOK {
		t.Fatalf("merge: exit %d\n%s\n%s", code, stdout, stderr)
	}
	want, err := results.Dir(single).ReadReport()
	if err != nil {
		t.Fatal(err)
	}
	got, err := results.Dir(merged).ReadReport()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Verdicts) != len(want.Verdicts) {
		t.Fatalf("merged %d verdicts, single %d", len(got.Verdicts), len(want.Verdicts))
	}
	for i := range want.Verdicts {
		g, w := got.Verdicts[i], want.Verdicts[i]
		if g.Objective != w.Objective || g.Stage != w.Stage || g.Status != w.Status || g.Kind == "ratio" && g.Total != w.Total {
			t.Errorf("verdict %d: merged %s/%s %s (total %d), single %s/%s %s (total %d)", i, g.Objective, g.Stage, g.Status, g.Total, w.Objective, w.Stage, w.Status, w.Total)
		}
	}
	for _, st := range []string{"normal", "peak"} {
		a, b := readScheduled(t, filepath.Join(merged, "stages", st)), readScheduled(t, filepath.Join(single, "stages", st))
		if len(a) != len(b) {
			t.Fatalf("stage %s: merged %d requests, single %d", st, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("stage %s request %d: merged %+v, single %+v", st, i, a[i], b[i])
			}
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := os.Stat(filepath.Join(merged, "shards", fmt.Sprintf("shard-%d", i), "environment.json")); err != nil {
			t.Errorf("the merged evidence lacks shard %d's environment: %v", i, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(merged, "manifest.json")); err != nil || !strings.Contains(string(b), "shards/shard-2/environment.json") {
		t.Errorf("manifest.json does not list the shards' environments: %v", err)
	}
	// check judges the merged evidence alike.
	if code, out, _ := tgCmd("check", "--slo", filepath.Join(filepath.Dir(plan), "slo.yaml"), merged); code != slo.ExitOK {
		t.Errorf("check on the merged evidence: exit %d\n%s", code, out)
	}
}
