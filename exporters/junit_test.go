package exporters

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/slo"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// sampleReport has one of each outcome: pass, fail, waived, expired
// waiver (fail), no data, pending manual stage.
func sampleReport(t *testing.T) *slo.Report {
	t.Helper()
	spec, err := slo.ParseSpec("slo.yaml", []byte(`
kind: SLO
name: chat
owner: team
objectives:
  - {name: ttft-p99, metric: ttft, threshold: 500ms, target: 99%}
  - {name: itl-p95, metric: itl, threshold: 20ms, target: 95%}
  - {name: e2e-p90, metric: e2e, threshold: 1s, target: 90%}
  - {name: errors, metric: error_rate, threshold: 1%}
  - {name: queue, metric: queue_delay, threshold: 100ms, target: 99%}
waivers:
  - {objective: itl-p95, owner: alice, reason: "decode <regression> & INF-1", expires: 2026-12-31}
  - {objective: e2e-p90, owner: bob, reason: old, expires: 2026-01-31}
`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := slo.ParsePlan("plan.yaml", []byte(`
kind: Plan
name: demo
target: http://127.0.0.1:8000
model: m
slo: slo.yaml
mix: mix.yaml
stages:
  - {name: normal, rate: 10, duration: 10s}
  - {name: failover, manual: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	// 300 requests decide a 99% target (and a 1% error rate) at 95%
	// confidence with no miss; 100 would leave them INCONCLUSIVE.
	var recs []loadgen.Record
	for i := 0; i < 300; i++ {
		start := time.Duration(i) * 100 * time.Millisecond
		r := loadgen.Record{Seq: int64(i), Stage: "normal", Intended: start, Sent: start, End: start + 2*time.Second, OutputTokens: 3}
		for j := 0; j < 3; j++ {
			r.Chunks = append(r.Chunks, loadgen.Chunk{At: start + 100*time.Millisecond + time.Duration(j)*50*time.Millisecond, Tokens: 1})
		}
		recs = append(recs, r)
	}
	return slo.Assess(plan, spec, slo.Input{Records: recs, Now: now})
}

func TestWriteJUnit(t *testing.T) {
	t.Parallel()
	r := sampleReport(t)
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, r); err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(got.Suites) != 2 || got.Tests != 6 || got.Failures != 2 || got.Errors != 1 {
		t.Fatalf("totals: tests %d failures %d errors %d\n%s", got.Tests, got.Failures, got.Errors, buf.String())
	}
	s := got.Suites[0]
	if s.Name != "normal" || s.Tests != 5 || s.Failures != 1 || s.Errors != 1 || s.Skipped != 1 {
		t.Fatalf("suite normal: %+v", s)
	}
	byName := map[string]junitCase{}
	for _, c := range s.Cases {
		byName[c.Name] = c
		if c.Classname != "tailgate.demo.normal" {
			t.Errorf("classname %q", c.Classname)
		}
	}
	if c := byName["ttft-p99"]; c.Failure != nil || c.Skipped != nil || c.Error != nil {
		t.Errorf("pass: %+v", c)
	}
	if c := byName["itl-p95"]; c.Skipped == nil || c.Skipped.Message != "waived by alice until 2026-12-31: decode <regression> & INF-1" {
		t.Errorf("waived: %+v", c)
	}
	if c := byName["e2e-p90"]; c.Failure == nil || !strings.Contains(c.Failure.Body, "expired 2026-01-31") || !strings.Contains(c.Failure.Body, "\nnote: ") {
		t.Errorf("expired waiver: %+v", c)
	}
	if c := byName["queue"]; c.Error == nil || c.Error.Type != "slo.NO_DATA" {
		t.Errorf("no data: %+v", c)
	}
	props := map[string]string{}
	for _, p := range s.Properties {
		props[p.Name] = p.Value
	}
	if v := props["tailgate.waived.itl-p95"]; !strings.Contains(v, "waived by alice") || !strings.Contains(v, "result FAIL") {
		t.Errorf("waived property: %q", v)
	}
	if v := props["tailgate.waiver_expired.e2e-p90"]; !strings.Contains(v, "bob") {
		t.Errorf("expired property: %q (%v)", v, props)
	}
	if c := got.Suites[1].Cases[0]; got.Suites[1].Name != "failover" || c.Name != "manual" || c.Failure == nil || c.Failure.Type != "slo.PENDING" {
		t.Errorf("manual: %+v", got.Suites[1])
	}
	validateJUnit(t, buf.Bytes())
}

// validateJUnit runs the XML through the JUnit consumers installed here:
// xmllint against testdata/junit.xsd (Debian libxml2-utils), and
// junitparser (Debian python3-junitparser), which reads it as CI plugins
// do. Each is skipped where it is not installed.
func validateJUnit(t *testing.T, doc []byte) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "junit.xml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	ran := 0
	if xmllint, err := exec.LookPath("xmllint"); err == nil {
		ran++
		out, err := exec.Command(xmllint, "-noout", "-schema", "testdata/junit.xsd", file).CombinedOutput()
		if err != nil {
			t.Errorf("xmllint rejects the JUnit XML: %v\n%s\n%s", err, out, doc)
		}
	}
	if py, err := exec.LookPath("/usr/bin/python3"); err == nil && exec.Command(py, "-c", "import junitparser").Run() == nil {
		ran++
		script := `
import sys, junitparser
x = junitparser.JUnitXml.fromfile(sys.argv[1])
n = f = e = s = 0
for suite in x:
    for case in suite:
        n += 1
        for r in case.result:
            if isinstance(r, junitparser.Failure): f += 1
            elif isinstance(r, junitparser.Error): e += 1
            elif isinstance(r, junitparser.Skipped): s += 1
print(n, f, e, s)
`
		out, err := exec.Command(py, "-c", script, file).CombinedOutput()
		if err != nil {
			t.Errorf("junitparser: %v\n%s", err, out)
		} else {
			var want junitSuites
			xml.Unmarshal(doc, &want)
			skipped := 0
			for _, s := range want.Suites {
				skipped += s.Skipped
			}
			if exp := strings.Join([]string{strconv.Itoa(want.Tests), strconv.Itoa(want.Failures), strconv.Itoa(want.Errors), strconv.Itoa(skipped)}, " "); strings.TrimSpace(string(out)) != exp {
				t.Errorf("junitparser counts %q, want %q", out, exp)
			}
		}
	}
	t.Logf("%d JUnit consumer(s) read the file", ran)
	if ran == 0 {
		t.Log("no JUnit consumer installed (apt-get install libxml2-utils python3-junitparser): structure checked only")
	}
}

func TestXSDRejectsBrokenJUnit(t *testing.T) {
	t.Parallel()
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Skip("xmllint not installed")
	}
	f := filepath.Join(t.TempDir(), "bad.xml")
	os.WriteFile(f, []byte(`<testsuites><testsuite name="a" tests="x" failures="0" errors="0"><testcase/></testsuite></testsuites>`), 0o644)
	if out, err := exec.Command(xmllint, "-noout", "-schema", "testdata/junit.xsd", f).CombinedOutput(); err == nil {
		t.Fatalf("the schema accepts a broken file:\n%s", out)
	}
}

// A stage's junit timestamp is when it ran (StageReport.Started), or for a
// manual stage when its result was recorded; judging again later (check,
// validate --record) does not move it.
func TestJUnitTimestampsAreStageStarts(t *testing.T) {
	t.Parallel()
	rep := sampleReport(t)
	ran := now.Add(-time.Hour)
	for i := range rep.Stages {
		if rep.Stages[i].Manual {
			rep.Stages[i].ManualResult = &slo.ManualRecord{Stage: rep.Stages[i].Name, Pass: true, By: "carol", At: now.Add(-30 * time.Minute)}
		} else {
			rep.Stages[i].Started = ran
		}
	}
	rep.EvaluatedAt = now.Add(24 * time.Hour)
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, rep); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, rep.EvaluatedAt.Format("2006-01-02T15")) {
		t.Errorf("junit carries the judging time:\n%s", out)
	}
	if !strings.Contains(out, `timestamp="`+ran.Format("2006-01-02T15:04:05")+`"`) {
		t.Errorf("junit lacks the stage start %s:\n%s", ran, out)
	}
}
