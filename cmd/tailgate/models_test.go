package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// mixOfAdapters writes a mix whose classes each name a model.
func mixOfAdapters(t *testing.T, a, b string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mix.yaml")
	mix := "kind: Mix\nseed: 1\nclasses:\n" +
		"  - {name: ca, weight: 1, model: " + a + ", headers: {x-gateway-inference-fairness-id: tenant-a}, source: {type: synthetic, input_tokens: 8}, max_tokens: 2}\n" +
		"  - {name: cb, weight: 1, model: " + b + ", source: {type: synthetic, input_tokens: 8}, max_tokens: 2}\n"
	if err := os.WriteFile(path, []byte(mix), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A mix whose classes name two adapters sends each class to its adapter:
// every record names it, and the simulator's own truth says the same
// adapter served that request.
func TestRunClassesNameTheirAdapters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, sim.Config{Model: "base", Adapters: []string{"lora-a", "lora-b"}, FixedTTFT: time.Millisecond})
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "--target", srv.URL+"/v1", "--model", "base", "--mix", mixOfAdapters(t, "lora-a", "lora-b"),
		"--rate", "40", "--duration", "500ms", "--out", dir)
	if code != slo.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	served := map[string]string{}
	for _, tr := range srv.Truth() {
		served[tr.ID] = tr.Model
	}
	want := map[string]string{"ca": "lora-a", "cb": "lora-b"}
	seen := map[string]int{}
	for _, r := range readJSONL(t, dir) {
		if r.Model != want[r.Class] {
			t.Fatalf("record %d of class %s: model %q, want %q", r.Seq, r.Class, r.Model, want[r.Class])
		}
		if got, ok := served[r.ID]; !ok || got != r.Model {
			t.Fatalf("record %d (%s): the simulator served %q, want %q", r.Seq, r.ID, got, r.Model)
		}
		seen[r.Class]++
	}
	if seen["ca"] == 0 || seen["cb"] == 0 {
		t.Fatalf("classes sent: %v", seen)
	}
}

// A mix naming an adapter the server does not list is refused before the
// load, naming it and the server's list, and nothing is sent.
func TestRunMissingAdapterRefused(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Model: "base", Adapters: []string{"lora-a"}, FixedTTFT: time.Millisecond})
	code, _, stderr := runCmd(t, "--target", srv.URL+"/v1", "--model", "base", "--mix", mixOfAdapters(t, "lora-a", "lora-z"),
		"--rate", "20", "--duration", "300ms", "--out", t.TempDir())
	if code != slo.ExitInvalid || !strings.Contains(stderr, `does not serve "lora-z" that the mix names: it lists "base", "lora-a"`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := len(srv.Truth()); n != 0 {
		t.Errorf("%d requests sent after a refused preflight", n)
	}
}
