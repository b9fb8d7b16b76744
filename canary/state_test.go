package canary

import (
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/slo"
)

// Coverage is the share of a window the canary ran through: a fraction of
// the window early in its life, 1 once it has run the whole window, and
// less again over a stretch it was down for.
func TestCoverage(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := newWindows(30*24*time.Hour, t0)
	for _, c := range []struct {
		at     time.Duration
		window time.Duration
		want   float64
	}{
		{2 * time.Second, 5 * time.Minute, 2.0 / 300},
		{10 * time.Minute, 5 * time.Minute, 1},
		{10 * time.Minute, time.Hour, 10.0 / 60},
		{30 * time.Minute, time.Hour, 0.5},
		{30 * time.Minute, 30 * 24 * time.Hour, 0.5 / (30 * 24)},
	} {
		if got := w.coverage(t0.Add(c.at), c.window); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("at +%s, %s window: coverage %.6f, want %.6f", c.at, c.window, got, c.want)
		}
	}
	// Saved at +30m, restored by a process that starts at +50m: the 20
	// minutes between are not covered (to one bucket: the minute the save
	// fell in counts whole).
	saved := newWindows(30*24*time.Hour, t0)
	saved.minutes.restore(w.minutes.state())
	saved.hours.restore(w.hours.state())
	saved.marked = t0.Add(50 * time.Minute)
	if got, want := saved.coverage(t0.Add(60*time.Minute), time.Hour), 40.0/60; got < want || got > want+1.0/60 {
		t.Errorf("after a 20-minute gap: 1h coverage %.4f, want %.4f", got, want)
	}
}

const stateCanary = `
kind: Canary
apiVersion: tailgate/v1
listen: 127.0.0.1:0
slo: slo.yaml
targets:
  - name: sim
    url: http://127.0.0.1:1
    model: m
    schedule: {interval: 30s}
`

// The windows outlive a restart through the state file: what one process
// counted, the next one shows, with its coverage; an objective whose
// definition changed starts empty, and an unreadable file costs the
// history, not the canary.
func TestStateFileKeepsWindowsAcrossRestart(t *testing.T) {
	dir := writeFiles(t, map[string]string{"canary.yaml": stateCanary, "slo.yaml": sloFile})
	path, state := filepath.Join(dir, "canary.yaml"), filepath.Join(dir, "state", "canary.json")
	os.MkdirAll(filepath.Dir(state), 0o755)
	d1, err := New(path, Options{StateFile: state})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	d1.mu.Lock()
	d1.states[stateKey{"sim", "chat", "errors"}].win.add(now, slo.Events{Good: 7, Bad: 3})
	d1.mu.Unlock()
	if err := d1.saveState(now); err != nil {
		t.Fatal(err)
	}

	logs := &syncbuf.Buffer{}
	d2, err := New(path, Options{StateFile: state, Log: logs})
	if err != nil {
		t.Fatal(err)
	}
	o := objectiveOf(t, d2.evaluate(time.Now()), "errors")
	w5 := window(o, "5m")
	if w5.Good != 7 || w5.Bad != 3 || w5.ErrorRatio != 0.3 {
		t.Errorf("restored 5m window %+v, want 7 good 3 bad", w5)
	}
	if w5.Coverage <= 0 || o.SLOWindow.Good != 7 {
		t.Errorf("restored: 5m coverage %v, SLO window %+v", w5.Coverage, o.SLOWindow)
	}
	if !strings.Contains(logs.String(), "restored the windows of 3 objectives") {
		t.Errorf("log: %s", logs.String())
	}

	// Another threshold: the counts meant something else.
	os.WriteFile(filepath.Join(dir, "slo.yaml"), []byte(strings.Replace(sloFile, "threshold: 1%", "threshold: 2%", 1)), 0o644)
	d3, err := New(path, Options{StateFile: state})
	if err != nil {
		t.Fatal(err)
	}
	if w := window(objectiveOf(t, d3.evaluate(time.Now()), "errors"), "5m"); w.Good+w.Bad != 0 {
		t.Errorf("a changed objective was restored: %+v", w)
	}
	if w := window(objectiveOf(t, d3.evaluate(time.Now()), "ttft"), "5m"); w.Coverage <= 0 {
		t.Errorf("unchanged ttft objective not restored")
	}

	os.WriteFile(state, []byte("{not json"), 0o644)
	logs = &syncbuf.Buffer{}
	if _, err := New(path, Options{StateFile: state, Log: logs}); err != nil {
		t.Fatalf("a broken state file stopped the canary: %v", err)
	}
	if !strings.Contains(logs.String(), "warning: state file "+state) {
		t.Errorf("log: %s", logs.String())
	}
}

func objectiveOf(t *testing.T, s *Status, name string) ObjectiveStatus {
	t.Helper()
	for _, o := range s.Targets[0].Objectives {
		if o.Name == name {
			return o
		}
	}
	t.Fatalf("no objective %s", name)
	return ObjectiveStatus{}
}

// /healthz fails when a probe loop has finished no probe for longer than
// its schedule and timeout allow, and not before; a loop that ended on
// its own (logged) is not stuck.
func TestHealthzFailsWhenProbeLoopIsStuck(t *testing.T) {
	// The fake clock stands still between setting the idle time and the
	// check, so the bound is tested to the nanosecond.
	synctest.Test(t, func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"canary.yaml": stateCanary, "slo.yaml": sloFile})
		d, err := New(filepath.Join(dir, "canary.yaml"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		tg := d.cfg.Targets[0]
		limit := stuckAfter(tg)
		if want := 3*(30*time.Second+tg.Timeout) + time.Minute; limit != want {
			t.Fatalf("stuckAfter = %s, want %s", limit, want)
		}
		run := &targetRun{t: tg, done: make(chan struct{})}
		d.runs["sim"] = run
		h := d.Handler()
		health := func() (int, string) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			return w.Code, w.Body.String()
		}
		for _, c := range []struct {
			idle time.Duration
			code int
		}{{limit, 200}, {limit + time.Nanosecond, 503}} {
			d.mu.Lock()
			d.stats["sim"].lastProgress = time.Now().Add(-c.idle)
			d.mu.Unlock()
			if code, body := health(); code != c.code || (code == 503 && !strings.Contains(body, "target sim: no probe finished for")) {
				t.Errorf("idle %s: /healthz %d %q, want %d", c.idle, code, body, c.code)
			}
		}
		close(run.done)
		if code, body := health(); code != 200 {
			t.Errorf("a loop that ended on its own: /healthz %d %s", code, body)
		}
	})
}

// A state file that cannot be written is told three ways: the error
// counter, the success timestamp that stops moving, and /healthz, which
// answers 503 naming the file while the latest write failed and 200 again
// after one succeeds. The path's parent is a regular file, so the write
// fails even as root.
func TestStateWriteFailureIsMeasuredAndUnhealthy(t *testing.T) {
	dir := writeFiles(t, map[string]string{"canary.yaml": stateCanary, "slo.yaml": sloFile, "blocker": "a file, not a directory\n"})
	state := filepath.Join(dir, "blocker", "canary.json")
	d, err := New(filepath.Join(dir, "canary.yaml"), Options{StateFile: state})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	health := func() (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return w.Code, w.Body.String()
	}
	metrics := func() (errs float64, last float64, hasLast bool) {
		fams, err := d.metrics.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			switch f.GetName() {
			case prom.CanaryStateWriteErrorsTotal:
				if f.GetHelp() == "" || f.GetType() != dto.MetricType_COUNTER {
					t.Errorf("%s: help %q type %v", f.GetName(), f.GetHelp(), f.GetType())
				}
				errs = f.Metric[0].GetCounter().GetValue()
			case prom.CanaryStateLastSuccessTimestampSeconds:
				if f.GetHelp() == "" || f.GetType() != dto.MetricType_GAUGE {
					t.Errorf("%s: help %q type %v", f.GetName(), f.GetHelp(), f.GetType())
				}
				last, hasLast = f.Metric[0].GetGauge().GetValue(), true
			}
		}
		return errs, last, hasLast
	}
	if code, body := health(); code != 200 {
		t.Fatalf("before any write: /healthz %d %s", code, body)
	}
	if errs, _, has := metrics(); errs != 0 || has {
		t.Fatalf("before any write: %v errors, success timestamp present %v", errs, has)
	}

	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 2 {
		err := d.saveState(t0.Add(time.Duration(i) * time.Minute))
		if err == nil || !strings.Contains(err.Error(), state) {
			t.Fatalf("write %d under a regular file: %v, want an error naming %s", i, err, state)
		}
	}
	errs, _, has := metrics()
	if errs != 2 || has {
		t.Errorf("after 2 failed writes: %v errors, success timestamp present %v", errs, has)
	}
	code, body := health()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "state file "+state) || !strings.Contains(body, "write failed") {
		t.Errorf("while writes fail: /healthz %d %q, want 503 naming %s", code, body, state)
	}

	// The directory appears: the next write succeeds and health returns.
	os.Remove(filepath.Join(dir, "blocker"))
	os.Mkdir(filepath.Join(dir, "blocker"), 0o755)
	at := t0.Add(5 * time.Minute)
	if err := d.saveState(at); err != nil {
		t.Fatal(err)
	}
	errs, last, has := metrics()
	if errs != 2 || !has || last != float64(at.Unix()) {
		t.Errorf("after a good write: %v errors, success timestamp %v (present %v), want 2 and %d", errs, last, has, at.Unix())
	}
	if code, body := health(); code != 200 {
		t.Errorf("after a good write: /healthz %d %s", code, body)
	}
	if _, err := os.Stat(state); err != nil {
		t.Error(err)
	}
}
