package main

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// madeUpSink is an output added once, through withSink: it counts what
// it is fed and its closes, per target.
type madeUpSink struct {
	mu     sync.Mutex
	adds   map[string]int
	closes int
	fed    chan struct{} // a token per record, dropped when full
}

func (m *madeUpSink) maker(target string) pipeline.Sink {
	return madeUpOne{m, target}
}

type madeUpOne struct {
	m      *madeUpSink
	target string
}

func (s madeUpOne) Name() string { return "made-up" }
func (s madeUpOne) Add(*loadgen.Record) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.m.adds == nil {
		s.m.adds = map[string]int{}
	}
	s.m.adds[s.target]++
	select {
	case s.m.fed <- struct{}{}:
	default:
	}
	return nil
}
func (s madeUpOne) Close() error { s.m.mu.Lock(); s.m.closes++; s.m.mu.Unlock(); return nil }

func (m *madeUpSink) count(target string) (adds, closes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.adds[target], m.closes
}

// recordsUnder counts the records of every requests.jsonl under dir.
func recordsUnder(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != results.RecordsFile {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			n++
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A made-up output, added once (liveOutputs, through withSink), is fed by
// every load command: run, validate and sweep give it each record their
// requests.jsonl files hold, and close it; the canary feeds it its probes.
func TestMadeUpSinkFedByEveryCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	sloFile := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(sloFile, []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: ttft, metric: ttft, threshold: 1s, target: 90%}\n"), 0o644)
	for _, c := range []struct {
		name string
		args func(out string) []string
	}{
		{"run", func(out string) []string {
			return []string{"run", "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--arrival", "constant",
				"--duration", "1s", "--max-tokens", "4", "--self-check", "warn", "--out", out}
		}},
		{"validate", func(out string) []string {
			return []string{"validate", "--plan", writePlan(t, srv.URL, "1s", false), "--self-check", "warn", "--out", out}
		}},
		{"sweep", func(out string) []string {
			return []string{"sweep", "--target", srv.URL, "--slo", sloFile, "--levels", "10,20", "--arrival", "constant",
				"--max-tokens", "4", "--warmup", "100ms", "--min-duration", "500ms", "--grace", "1s", "--self-check", "warn", "--out", out}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m madeUpSink
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := tgCmdCtx(withSink(context.Background(), m.maker), c.args(out)...)
			if code == slo.ExitUsage || code == slo.ExitInvalid {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			adds, closes := m.count(srv.URL)
			if want := recordsUnder(t, out); adds != want || want == 0 {
				t.Errorf("the made-up sink got %d records, requests.jsonl holds %d", adds, want)
			}
			if closes == 0 {
				t.Errorf("the made-up sink was never closed")
			}
		})
	}
	t.Run("canary", func(t *testing.T) {
		m := madeUpSink{fed: make(chan struct{}, 1)}
		ctx, cancel := context.WithCancel(withSink(context.Background(), m.maker))
		defer cancel()
		stderr := &syncbuf.Buffer{}
		done := make(chan int, 1)
		go func() {
			done <- exitCode(cmdCanary(ctx, []string{"--config", writeCanary(t, srv.URL)}, &bytes.Buffer{}, stderr))
		}()
		timeout := time.After(30 * time.Second)
		for n := 0; n < 5; {
			select {
			case <-m.fed:
				n, _ = m.count(srv.URL)
			case <-timeout:
				t.Fatalf("the made-up sink got no 5 probes in 30s:\n%s", stderr.String())
			}
		}
		cancel()
		if code := <-done; code != slo.ExitOK {
			t.Errorf("canary exit %d\n%s", code, stderr.String())
		}
		if _, closes := m.count(srv.URL); closes == 0 {
			t.Errorf("the canary never closed the made-up sink")
		}
	})
}
