package canary

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// targetSink counts one target's probes as the Prometheus sink counts
// them in operate (a probe the canary cancelled at shutdown counts
// nowhere).
type targetSink struct {
	mu           *sync.Mutex
	adds, closes *int
}

func (s targetSink) Name() string { return "counting" }
func (s targetSink) Add(r *loadgen.Record) error {
	switch r.ErrorKind {
	case loadgen.ErrCancelled, loadgen.ErrDropped, loadgen.ErrNotDue:
		return nil
	}
	s.mu.Lock()
	*s.adds++
	s.mu.Unlock()
	return nil
}
func (s targetSink) Close() error { s.mu.Lock(); *s.closes++; s.mu.Unlock(); return nil }

// Options.Sinks gives every target's probe loop a sink of its own, fed
// every probe the Prometheus sink counts, and closed when the loop ends.
func TestCanarySinksPerTarget(t *testing.T) {
	srv := simtest.Start(t, fastSim())
	dir := writeFiles(t, map[string]string{"canary.yaml": fmt.Sprintf(canaryFile, srv.URL, "2s", 40, downTarget), "slo.yaml": sloFile})
	var mu sync.Mutex
	adds, closes := map[string]*int{}, map[string]*int{}
	logs := newEventLog()
	d, err := New(filepath.Join(dir, "canary.yaml"), Options{Version: "test", Log: logs, StopTimeout: 3 * time.Second,
		Sinks: func(t Target) []pipeline.Sink {
			mu.Lock()
			defer mu.Unlock()
			if adds[t.Name] == nil {
				adds[t.Name], closes[t.Name] = new(int), new(int)
			}
			return []pipeline.Sink{targetSink{&mu, adds[t.Name], closes[t.Name]}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	waitFor(t, logs, 5*time.Second, "10 probes of sim", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return adds["sim"] != nil && *adds["sim"] >= 10 && adds["down"] != nil && *adds["down"] >= 1
	})
	cancel()
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	fams, err := d.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	mu.Lock()
	defer mu.Unlock()
	for _, target := range []string{"sim", "down"} {
		want := total(byName, prom.RequestsTotal, map[string]string{"target": target})
		if got := float64(*adds[target]); got != want {
			t.Errorf("target %s: its sink got %v probes, %s counts %v", target, got, prom.RequestsTotal, want)
		}
		if *closes[target] < 1 {
			t.Errorf("target %s: its sink was not closed at shutdown", target)
		}
	}
}
