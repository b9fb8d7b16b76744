package prompts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeMooncake writes n rows 100 ms apart and a mix that replays them.
func writeMooncake(t *testing.T, n int) (mix, trace string) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": %d, \"hash_ids\": [%d, %d]}\n",
			i*100, 20+i%50, 4+i%9, i%7, i)
	}
	trace = filepath.Join(dir, "trace.jsonl")
	mix = filepath.Join(dir, "mix.yaml")
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := "kind: Mix\nname: stream\nseed: 3\nclasses:\n  - name: mc\n    source: {type: mooncake, path: trace.jsonl, block_tokens: 16}\n"
	if err := os.WriteFile(mix, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return mix, trace
}

func sourceOf(t *testing.T, m *Mix) canonicalSource {
	t.Helper()
	var cm canonicalMix
	if err := json.Unmarshal(m.Canonical(), &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Classes[0].Source
}

// A run of a known length reads a trace only up to its horizon plus the
// look-ahead, and sends exactly what a whole read would have sent then.
func TestMooncakeReadToHorizon(t *testing.T) {
	t.Parallel()
	mixPath, trace := writeMooncake(t, 2000) // 200 s of trace
	full, err := LoadMix(mixPath, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scale float64
		rows  int
	}{
		{1, 350},   // (5 s + 30 s look-ahead) / 100 ms
		{0.5, 700}, // twice as fast: twice the trace in the same run
	} {
		opts := LoadOptions{Horizon: 5 * time.Second, TimeScale: tc.scale}
		m, err := LoadMix(mixPath, opts)
		if err != nil {
			t.Fatal(err)
		}
		if m.Len() != tc.rows {
			t.Fatalf("scale %g: %d rows read, want %d", tc.scale, m.Len(), tc.rows)
		}
		ref := full
		if tc.scale != 1 {
			if ref, err = LoadMix(mixPath, LoadOptions{TimeScale: tc.scale}); err != nil {
				t.Fatal(err)
			}
		}
		a, b := drainTrace(t, m, 9), drainTrace(t, ref, 9)
		for i := range a {
			if a[i].ID != b[i].ID || a[i].At != b[i].At || a[i].Text != b[i].Text || a[i].MaxTokens != b[i].MaxTokens {
				t.Fatalf("scale %g: prompt %d differs from the whole read's: %s at %v vs %s at %v", tc.scale, i, a[i].ID, a[i].At, b[i].ID, b[i].At)
			}
		}
		again, err := LoadMix(mixPath, opts)
		if err != nil {
			t.Fatal(err)
		}
		if again.Hash() != m.Hash() {
			t.Errorf("scale %g: the same file and horizon give two identities", tc.scale)
		}
	}
	m, err := LoadMix(mixPath, LoadOptions{Horizon: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	src := sourceOf(t, m)
	fi, _ := os.Stat(trace)
	data, _ := os.ReadFile(trace)
	want := int64(strings.Index(string(data), "{\"timestamp\": 35000,"))
	if src.ReadBytes != want || src.FileSize != fi.Size() || src.ModTime == "" {
		t.Errorf("identity: read_bytes %d file_size %d mod_time %q, want %d, %d and a time", src.ReadBytes, src.FileSize, src.ModTime, want, fi.Size())
	}
	if m.Hash() == full.Hash() || sourceOf(t, full).ReadBytes != 0 {
		t.Errorf("a partial read must not claim the whole file's identity")
	}
	// A change past the part read still changes the identity (its size).
	if err := os.WriteFile(trace, append(data, "{\"timestamp\": 999999, \"input_length\": 5, \"output_length\": 5}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := LoadMix(mixPath, LoadOptions{Horizon: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if changed.Hash() == m.Hash() {
		t.Errorf("a file grown past the part read kept its identity")
	}
}

// until and a horizon: the nearer bound stops the read.
func TestMooncakeHorizonAndUntil(t *testing.T) {
	t.Parallel()
	mixPath, _ := writeMooncake(t, 2000)
	data, _ := os.ReadFile(mixPath)
	withUntil := strings.Replace(string(data), "block_tokens: 16}", "block_tokens: 16, until: 10s}", 1)
	if err := os.WriteFile(mixPath, []byte(withUntil), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadMix(mixPath, LoadOptions{Horizon: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 100 {
		t.Errorf("%d rows, want the 100 before until", m.Len())
	}
}
