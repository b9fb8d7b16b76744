package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// Every command says what was wrong with a flag and where to look, on
// stderr, with exit 2 (issue: they used to exit 2 printing nothing).
func TestFlagErrorsSayWhy(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--rat", "5"}, "unknown flag: --rat"},
		{[]string{"run", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"run", "--rate", "five"}, `invalid argument "five" for "--rate"`},
		{[]string{"run", "--duration", "2"}, `invalid argument "2" for "--duration" flag: must be a duration like "30s"`},
		{[]string{"validate", "--plan"}, "flag needs an argument: --plan"},
		{[]string{"validate", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"check", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"sign", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"verify", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"sim", "--bogus"}, "unknown flag: --bogus"},
	}
	for _, c := range cases {
		code, stdout, stderr := tgCmd(c.args...)
		if code != slo.ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
		if c.args[0] != "sim" && !strings.Contains(stderr, "tailgate help "+c.args[0]) {
			t.Errorf("%v: no usage hint in %q", c.args, stderr)
		}
		if stdout != "" {
			t.Errorf("%v: stdout %q, want nothing", c.args, stdout)
		}
	}
	// help CMD goes to stdout, so `tailgate help run | grep rate` works.
	for _, c := range []string{"run", "validate", "check", "sign", "verify", "sim"} {
		code, stdout, _ := tgCmd("help", c)
		if code != slo.ExitOK || !strings.Contains(stdout, "Usage: tailgate "+c) || !strings.Contains(stdout, "--") {
			t.Errorf("help %s: exit %d, stdout %q", c, code, stdout)
		}
	}
	if _, stdout, _ := tgCmd("help", "run"); !strings.Contains(stdout, "--rate") {
		t.Error("help run does not list --rate")
	}
}

// Targets that cannot work are usage errors that say how to fix them.
func TestTargetUsageErrors(t *testing.T) {
	for target, want := range map[string]string{
		"127.0.0.1:8000":         "did you mean http://127.0.0.1:8000",
		"http://127.0.0.1:99999": `port "99999"`,
		"ftp://127.0.0.1:21":     `scheme "ftp"`,
	} {
		code, _, stderr := tgCmd("run", "--target", target, "--model", "sim-llama-8b", "--rate", "1", "--duration", "1s")
		if code != slo.ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("--target %s: exit %d %q; want 2 and %q", target, code, stderr, want)
		}
	}
	code, _, stderr := tgCmd("check", "--slo", "../../testdata/slo/chat.yaml", "--at", "garbage", t.TempDir())
	if code != slo.ExitUsage || !strings.Contains(stderr, `--at "garbage": want an RFC 3339 time`) || strings.Contains(stderr, "parsing time") {
		t.Errorf("--at garbage: %d %q", code, stderr)
	}
}

// A run that measures nothing is a usage error, not a quiet success.
func TestRunNothingMeasuredIsUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"--stages", "0@2s"},
		{"--rate", "5", "--warmup", "10s", "--duration", "3s"},
		{"--rate", "5", "--requests", "10", "--warmup", "10"},
	} {
		code, _, stderr := runCmd(t, append([]string{"--model", "sim-llama-8b"}, args...)...)
		if code != slo.ExitUsage || !strings.Contains(stderr, "nothing would be") {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}

func fastSim(t *testing.T, faults ...sim.FaultRule) *simtest.Server {
	cfg := sim.DefaultConfig()
	// TTFT 30 ms: the self-check's lateness limit (5% of TTFT p50) is then
	// 1.5 ms, above what a loaded two-core test machine adds.
	cfg.FixedTTFT, cfg.FixedITL = 30*time.Millisecond, time.Millisecond
	cfg.Faults = faults
	return simtest.Start(t, cfg)
}

// A run whose requests mostly fail is invalid (exit 3) and says so, and its
// summary says why; --max-error-rate moves the limit.
func TestRunMostlyFailingIsInvalid(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t, sim.FaultRule{Kind: sim.FaultHTTP503, Every: 2})
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "50", "--arrival", "constant",
		"--duration", "1s", "--max-tokens", "4", "--out", dir)
	if code != slo.ExitInvalid || !strings.Contains(stderr, "RUN INVALID: stage main: errors: 25 of 50 sent requests failed (50%), above the 5% validity bound") {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if !strings.Contains(stdout, "requests sent 50") {
		t.Errorf("the summary must still be printed:\n%s", stdout)
	}
	s := readSummary(t, dir)
	if s.Summary.Requests.Errors != 25 || s.Validity.Valid || len(s.Validity.Reasons) != 1 || s.Validity.MaxErrorRate != 0.05 {
		t.Errorf("validity %+v, errors %d", s.Validity, s.Summary.Requests.Errors)
	}
	code, _, stderr = runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "50", "--arrival", "constant",
		"--duration", "1s", "--max-tokens", "4", "--max-error-rate", "0.6", "--out", t.TempDir())
	if code != slo.ExitOK {
		t.Errorf("--max-error-rate 0.6: exit %d %s", code, stderr)
	}
}

// The server dies mid-run: most requests fail to connect; the run is
// invalid and keeps what it measured.
func TestRunServerKilledMidRunIsInvalid(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	go func() {
		// Down once it has answered a few: mid-run, however slow the
		// process was to start.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		srv.Await(ctx, func() bool {
			answered := 0
			for _, tr := range srv.Truth() {
				if tr.Outcome == "ok" {
					answered++
				}
			}
			return answered >= 5
		})
		srv.Close()
	}()
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "40", "--arrival", "constant",
		"--duration", "1500ms", "--max-tokens", "4", "--timeout", "1s", "--metrics-url", "off", "--out", dir)
	if code != slo.ExitInvalid || !strings.Contains(stderr, "RUN INVALID") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s := readSummary(t, dir)
	if s.Summary.Requests.OK == 0 || s.Summary.Requests.ErrorsByKind["connect"] == 0 {
		t.Errorf("want some ok and connect errors: %+v", s.Summary.Requests)
	}
}

// run --slo judges the run like check: exit 1 on a failed objective, 4 on
// one the sample does not decide (20 requests cannot show a 99% target
// met), verdict.json beside summary.json, the report in summary.slo.
func TestRunJudgesSLO(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	base := t.TempDir()
	write := func(name, ttft, target string) string {
		p := filepath.Join(base, name)
		os.WriteFile(p, []byte("kind: SLO\nname: t\nowner: o\nobjectives:\n  - {name: ttft-p99, metric: ttft, threshold: "+ttft+", target: "+target+"}\n"+
			"  - {name: errors, metric: error_rate, threshold: 50%}\n"), 0o644)
		return p
	}
	for i, c := range []struct {
		ttft, target string
		code         int
	}{{"1s", "50%", slo.ExitOK}, {"1s", "99%", slo.ExitInconclusive}, {"1us", "99%", slo.ExitFailed}} {
		dir := filepath.Join(base, fmt.Sprint("out-", i))
		code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--duration", "1s",
			"--max-tokens", "4", "--slo", write(fmt.Sprint("slo-", i, ".yaml"), c.ttft, c.target), "--out", dir)
		if code != c.code || !strings.Contains(stdout, "ttft-p99") {
			t.Errorf("ttft ≤ %s: exit %d, want %d\n%s\n%s", c.ttft, code, c.code, stdout, stderr)
		}
		s := readSummary(t, dir)
		if s.SLO == nil || len(s.SLO.Verdicts) != 2 {
			t.Errorf("summary.slo %+v", s.SLO)
		}
		if _, err := os.Stat(filepath.Join(dir, results.VerdictFile)); err != nil {
			t.Error(err)
		}
	}
}

// run --out refuses to overwrite an earlier result without --force.
func TestRunRefusesToOverwrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	dir := t.TempDir()
	args := []string{"--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--duration", "500ms", "--max-tokens", "2", "--out", dir}
	if code, _, stderr := runCmd(t, args...); code != slo.ExitOK {
		t.Fatalf("first run: %d %s", code, stderr)
	}
	before, _ := os.ReadFile(filepath.Join(dir, results.RecordsFile))
	code, _, stderr := runCmd(t, args...)
	if code != slo.ExitUsage || !strings.Contains(stderr, "already holds results (--force to replace them)") {
		t.Fatalf("second run: %d %s", code, stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, results.RecordsFile)); !bytes.Equal(before, after) {
		t.Error("the refused run changed requests.jsonl")
	}
	if code, _, stderr := runCmd(t, append(args, "--force")...); code != slo.ExitOK {
		t.Fatalf("--force: %d %s", code, stderr)
	}
}

// check re-judges a run directory, queue delay included: run saves the
// server's histogram in queue_delay.json.
func TestCheckRejudgesRunDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	dir := t.TempDir()
	if code, _, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--duration", "1500ms",
		"--max-tokens", "2", "--telemetry-interval", "200ms", "--out", dir); code != slo.ExitOK {
		t.Fatalf("run: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, results.QueueDelayFile)); err != nil {
		t.Fatalf("run wrote no %s: %v", results.QueueDelayFile, err)
	}
	// A fixed --at: the header names the judging time.
	at := "--at=2026-12-01T00:00:00Z"
	code, stdout, stderr := tgCmd("check", "--slo", "../../testdata/slo/chat.yaml", at, dir)
	if strings.Contains(stdout, "queue-p99  main    -      NO_DATA") || !strings.Contains(stdout, "queue-p99") {
		t.Errorf("queue delay not judged (exit %d):\n%s\n%s", code, stdout, stderr)
	}
	// A directory written before queue_delay.json: the summary's histogram
	// serves its one stage.
	os.Remove(filepath.Join(dir, results.QueueDelayFile))
	_, stdout2, _ := tgCmd("check", "--slo", "../../testdata/slo/chat.yaml", at, dir)
	if stdout2 != stdout {
		t.Errorf("judged differently from summary.json's histogram:\n%s\nvs\n%s", stdout2, stdout)
	}
}

// A run killed with -9 leaves no summary.json: check says the run was cut
// short and judges it invalid; a torn last line is skipped and said.
func TestCheckCutShortAndTornLine(t *testing.T) {
	recs := liveRecords(1, false)
	s, _, dir := writeRun(t, recs)
	os.Remove(filepath.Join(dir, results.SummaryFile))
	code, stdout, stderr := tgCmd("check", "--slo", s, dir)
	if code != slo.ExitInvalid || !strings.Contains(stderr, "the run was cut short") || !strings.Contains(stdout, "incomplete") {
		t.Errorf("cut short: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Tear the last line in half.
	p := filepath.Join(dir, results.RecordsFile)
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-20], 0o644)
	code, _, stderr = tgCmd("check", "--slo", s, dir)
	if code != slo.ExitInvalid || !strings.Contains(stderr, "is torn") || !strings.Contains(stderr, "judged the 799 records before it") {
		t.Errorf("torn: exit %d\n%s", code, stderr)
	}
	// A bad line in the middle is still an error naming file and line.
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[3] = []byte("{not json\n")
	os.WriteFile(p, bytes.Join(lines, nil), 0o644)
	if code, _, stderr := tgCmd("check", "--slo", s, dir); code != slo.ExitUsage || !strings.Contains(stderr, results.RecordsFile+":4:") {
		t.Errorf("bad middle line: exit %d %s", code, stderr)
	}
}

// sign refuses a directory that holds no results.
func TestSignRefusesEmptyDirectory(t *testing.T) {
	keys := t.TempDir()
	key := filepath.Join(keys, "k.pem")
	tgCmd("sign", "--keygen", "--key", key)
	empty := t.TempDir()
	code, _, stderr := tgCmd("sign", "--key", key, empty)
	if code != slo.ExitUsage || !strings.Contains(stderr, "holds no results") {
		t.Errorf("exit %d %s", code, stderr)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("sign wrote into an empty directory: %v", ents)
	}
}

// A full disk (a 64 KiB tmpfs): the run stops sending at the first write
// error, prints the summary to stdout, names every file affected and the
// records lost, and exits 3; check then judges what reached the disk.
func TestRunDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, 0) })
	srv := fastSim(t)
	dir := filepath.Join(mnt, "run")
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "200", "--arrival", "constant",
		"--duration", "3s", "--max-tokens", "16", "--metrics-url", "off", "--out", dir)
	if code != slo.ExitInvalid {
		t.Fatalf("exit %d, want 3\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "requests sent") {
		t.Errorf("no summary on stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, results.RecordsFile) || !strings.Contains(stderr, "no space left on device") ||
		!strings.Contains(stderr, "records not written from there on") {
		t.Errorf("stderr does not name the file, the cause and the loss:\n%s", stderr)
	}
	if !strings.Contains(stderr, "stopped sending") {
		t.Errorf("the run did not stop sending:\n%s", stderr)
	}
	var sent int
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "requests sent") {
			fmt.Sscanf(l, "requests sent %d", &sent)
		}
	}
	if sent >= 600 {
		t.Errorf("sent %d: the run went on after the disk filled", sent)
	}
	// check reads what is there, torn tail included.
	code, _, stderr = tgCmd("check", "--slo", "../../testdata/slo/chat.yaml", dir)
	if code == slo.ExitUsage {
		t.Errorf("check refused the file: %s", stderr)
	}
}

// Secrets in the target URL (user info and query), a header and the API
// key never reach any file of a validate or run directory, nor stdout or
// stderr.
func TestSecretsNeverWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t, sim.FaultRule{Kind: sim.FaultHTTP429, Every: 5})
	t.Setenv("OPENAI_API_KEY", "sk-SECRET-key")
	target := strings.Replace(srv.URL, "http://", "http://user:SECRET@", 1) + "/v1?api_key=SECRET"
	base := t.TempDir()
	// The target comes on the command line: a plan file is copied into the
	// evidence byte for byte, so credentials do not belong in it.
	plan := writePlan(t, srv.URL, "1s", false)
	vdir := filepath.Join(base, "validate")
	code, vout, verr := tgCmd("validate", "--plan", plan, "--target", target, "--out", vdir, "--header", "Authorization: Bearer SECRET",
		"--dcgm-url", srv.URL+"/metrics?token=SECRET", "--max-error-rate", "1")
	if code == slo.ExitUsage {
		t.Fatalf("validate: %d\n%s", code, verr)
	}
	rdir := filepath.Join(base, "run")
	_, rout, rerr := runCmd(t, "--target", target, "--model", "sim-llama-8b", "--rate", "20", "--duration", "500ms",
		"--header", "Authorization: Bearer SECRET", "--out", rdir, "--max-error-rate", "1")
	// Discovery failure messages go through the same rule.
	_, dout, derr := runCmd(t, "--target", "http://user:SECRET@127.0.0.1:1/v1?key=SECRET", "--rate", "1", "--duration", "1s")
	texts := map[string]string{"validate stdout": vout, "validate stderr": verr, "run stdout": rout, "run stderr": rerr,
		"discovery stdout": dout, "discovery stderr": derr}
	for _, root := range []string{vdir, rdir} {
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				b, _ := os.ReadFile(p)
				texts[p] = string(b)
			}
			return nil
		})
	}
	for _, f := range []string{"environment.json", "summary.json", "requests.jsonl", "verdict.json", "junit.xml", "telemetry.jsonl"} {
		found := false
		for p := range texts {
			if filepath.Base(p) == f {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s was written: the test would prove nothing about it", f)
		}
	}
	for where, text := range texts {
		if strings.Contains(text, "SECRET") {
			i := strings.Index(text, "SECRET")
			t.Errorf("%s holds a secret: …%s…", where, text[max(0, i-60):min(len(text), i+20)])
		}
	}
	var env map[string]any
	b, _ := os.ReadFile(filepath.Join(vdir, "environment.json"))
	json.Unmarshal(b, &env)
	if env["command"] == nil {
		t.Error("environment.json has no command line")
	}
}

// summary.json keeps every key the pre-pipeline release wrote, with its
// JSON type (the fixed tailgate.summary/v1 contract: add, never rename).
func TestSummaryContract(t *testing.T) {
	srv := simtest.Start(t, sim.DefaultConfig())
	dir := t.TempDir()
	if code, _, stderr := runCmd(t, "--target", srv.URL, "--rate", "20", "--duration", "1s", "--max-tokens", "4", "--out", dir); code != slo.ExitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, results.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		join := func(k string) string {
			if path == "" {
				return k
			}
			return path + "." + k
		}
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				have[path+" {}"] = true
			}
			for k, e := range x {
				walk(e, join(k))
			}
		case []any:
			have[path+" []"] = true
			if len(x) > 0 {
				if _, ok := x[0].(map[string]any); ok {
					walk(x[0], path+"[]")
				}
			}
		case string:
			have[path+" string"] = true
		case float64:
			have[path+" number"] = true
		case bool:
			have[path+" bool"] = true
		case nil:
			have[path+" null"] = true
		}
	}
	walk(v, "")
	golden, err := os.ReadFile("testdata/summary-v1-keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(golden), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if have[line] {
			continue
		}
		// An empty map may now have entries; a null may now be an object.
		p, typ, _ := strings.Cut(line, " ")
		if typ == "{}" || typ == "null" {
			found := false
			for k := range have {
				if strings.HasPrefix(k, p+".") || k == p+" {}" {
					found = true
				}
			}
			if found || typ == "null" && (have[p+" {}"]) {
				continue
			}
		}
		t.Errorf("summary.json lost %q", line)
	}
}

// llama.cpp's /metrics is understood (running, deferred, KV) and has no
// queue histogram: queue_delay is NO_DATA with that reason, in run --slo
// and again in check.
func TestLlamaCppMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.Profile, cfg.Slots = sim.ProfileLlamaCpp, 4
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, 2*time.Millisecond
	srv := simtest.Start(t, cfg)
	dir := t.TempDir()
	_, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--concurrency", "4", "--duration", "1500ms",
		"--max-tokens", "8", "--telemetry-interval", "200ms", "--slo", "../../testdata/slo/chat.yaml", "--out", dir, "--max-error-rate", "1")
	s := readSummary(t, dir)
	if s.Telemetry == nil || s.Telemetry.Family != "llamacpp" || s.Telemetry.Running == nil {
		t.Fatalf("telemetry %+v\n%s", s.Telemetry, stderr)
	}
	if !strings.Contains(stdout, "llama.cpp") || !strings.Contains(stdout, "NO_DATA") {
		t.Errorf("queue_delay not NO_DATA with llama.cpp's reason:\n%s", stdout)
	}
	_, cout, _ := tgCmd("check", "--slo", "../../testdata/slo/chat.yaml", dir)
	if !strings.Contains(cout, "llama.cpp") {
		t.Errorf("check lost the reason:\n%s", cout)
	}
}

// A server that ignores "stream" (one JSON body) is named in a warning and
// gives no ITL; a 200 text/html page is a protocol error naming its
// content type, not a truncated stream.
func TestServerIgnoringStreamAndHTML(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t, sim.FaultRule{Kind: sim.FaultIgnoreStream, Every: 1})
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--duration", "500ms", "--max-tokens", "8", "--out", dir)
	if code != slo.ExitOK || !strings.Contains(stdout, `the server ignored "stream"`) {
		t.Errorf("ignore_stream: exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, dir)
	if s.LatencyMs["itl"].Count != 0 || s.LatencyMs["ttft"].Count == 0 {
		t.Errorf("itl %+v ttft %+v: an unstreamed answer has a TTFT and no ITL", s.LatencyMs["itl"], s.LatencyMs["ttft"])
	}
	html := fastSim(t, sim.FaultRule{Kind: sim.FaultHTML200, Every: 1})
	dir = t.TempDir()
	runCmd(t, "--target", html.URL, "--model", "sim-llama-8b", "--rate", "20", "--duration", "300ms", "--max-tokens", "8", "--out", dir)
	s = readSummary(t, dir)
	b, _ := os.ReadFile(filepath.Join(dir, results.RecordsFile))
	if s.Requests.ErrorsByKind["protocol"] == 0 || s.Requests.ErrorsByKind["stream_truncated"] != 0 || !strings.Contains(string(b), "text/html") {
		t.Errorf("html_200: %v\n%.300s", s.Requests.ErrorsByKind, b)
	}
}
