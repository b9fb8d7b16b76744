package prompts

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// drainTrace reads a trace source to the end.
func drainTrace(t *testing.T, m *Mix, seed int64) []*Prompt {
	t.Helper()
	src := m.Source(seed)
	var out []*Prompt
	for {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if len(out) != m.Len() {
		t.Errorf("drew %d prompts, Len() = %d", len(out), m.Len())
	}
	if _, err := src.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the end: %v, want io.EOF", err)
	}
	return out
}

// readAzureOffsets parses the sample trace independently of the package:
// each row's offset from the first, in nanoseconds.
func readAzureOffsets(t *testing.T, path string) (offs []int64, in, out []int) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	var t0 time.Time
	for sc.Scan() {
		cols := strings.Split(sc.Text(), ",")
		ts, err := time.Parse("2006-01-02 15:04:05.0000000", cols[0])
		if err != nil {
			t.Fatal(err)
		}
		if t0.IsZero() {
			t0 = ts
		}
		offs = append(offs, int64(ts.Sub(t0)))
		a, _ := strconv.Atoi(cols[1])
		b, _ := strconv.Atoi(cols[2])
		in, out = append(in, a), append(out, b)
	}
	return offs, in, out
}

// Trace replay: each prompt's At is its row's offset from the first row
// times the time scale. The package computes At itself; the mean absolute
// difference from the independently computed offsets must be under 1 ms
// (the engine's own timing is tested with the engine), and here it is 0.
func TestTraceAtMatchesTimestamps(t *testing.T) {
	t.Parallel()
	offs, in, out := readAzureOffsets(t, "../testdata/mixes/azure-conv-excerpt.csv")
	for _, scale := range []float64{1, 0.5, 0.1, 3} {
		m, err := LoadMix("../testdata/mixes/trace-azure.yaml", LoadOptions{TimeScale: scale})
		if err != nil {
			t.Fatal(err)
		}
		ps := drainTrace(t, m, 1)
		if len(ps) != len(offs) {
			t.Fatalf("scale %v: %d prompts for %d rows", scale, len(ps), len(offs))
		}
		var sumAbs time.Duration
		var last time.Duration
		tok := m.Tokenizer()
		for i, p := range ps {
			want := time.Duration(float64(offs[i]) * scale)
			d := p.At - want
			if d < 0 {
				d = -d
			}
			sumAbs += d
			if d > time.Microsecond {
				t.Errorf("scale %v row %d: At %v, want %v", scale, i, p.At, want)
			}
			if p.At < last {
				t.Errorf("At goes backwards at %d", i)
			}
			last = p.At
			if p.InputTokens != in[i] || p.MaxTokens != out[i] || p.Params["ignore_eos"] != true {
				t.Errorf("row %d: %d/%d tokens, want %d/%d", i, p.InputTokens, p.MaxTokens, in[i], out[i])
			}
			if i%40 == 0 && tok.Count(p.Text) != in[i] {
				t.Errorf("row %d: text has %d tokens, want %d", i, tok.Count(p.Text), in[i])
			}
		}
		if mean := sumAbs / time.Duration(len(ps)); mean >= time.Millisecond {
			t.Errorf("scale %v: mean |At - scaled timestamp| = %v", scale, mean)
		}
		if m.Span() != ps[len(ps)-1].At {
			t.Errorf("Span %v, last At %v", m.Span(), ps[len(ps)-1].At)
		}
	}
}

// Several trace classes merge by At: two classes cut from one BurstGPT
// file by model give back the file's arrival times, in order, each At
// measured from the file's first row; failed rows are skipped.
func TestTraceMergeAndFilter(t *testing.T) {
	t.Parallel()
	m, err := LoadMix("../testdata/mixes/trace-burstgpt.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := drainTrace(t, m, 2)
	// Independent reading of the file.
	f, _ := os.ReadFile("../testdata/mixes/burstgpt-excerpt.csv")
	lines := strings.Split(strings.TrimSpace(string(f)), "\n")[1:]
	first, _ := strconv.Atoi(strings.Split(lines[0], ",")[0])
	type want struct {
		class string
		at    time.Duration
		in    int
	}
	var wants []want
	for _, l := range lines {
		c := strings.Split(l, ",")
		if c[3] == "0" {
			continue
		}
		ts, _ := strconv.Atoi(c[0])
		in, _ := strconv.Atoi(c[2])
		cls := map[string]string{"ChatGPT": "chatgpt", "GPT-4": "gpt4"}[c[1]]
		wants = append(wants, want{cls, time.Duration(ts-first) * time.Second, in})
	}
	if len(ps) != len(wants) {
		t.Fatalf("%d prompts, want %d", len(ps), len(wants))
	}
	for i, p := range ps {
		w := wants[i]
		// Rows with equal timestamps may come in class order rather than
		// file order; compare time, and class and length where unambiguous.
		if p.At != w.at {
			t.Fatalf("prompt %d: At %v, want %v", i, p.At, w.at)
		}
		if (i == 0 || wants[i-1].at != w.at) && (i+1 == len(wants) || wants[i+1].at != w.at) && (p.Class != w.class || p.InputTokens != w.in) {
			t.Errorf("prompt %d: %s/%d, want %s/%d", i, p.Class, p.InputTokens, w.class, w.in)
		}
	}
}

// A window (from, until) keeps rows whose offset from the trace's first
// row is in [from, until), and measures At from the window's start.
func TestTraceWindow(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
classes:
  - {name: w, source: {type: azure, path: t.csv, from: 2s, until: 3400ms}}
`, map[string]string{"t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2024-05-10 00:00:00.5+00:00,10,1\n2024-05-10 00:00:02.5+00:00,20,2\n" +
		"2024-05-10 00:00:04+00:00,30,3\n2024-05-10 00:00:03+00:00,40,4\n"})
	ps := drainTrace(t, m, 0)
	if len(ps) != 2 || ps[0].InputTokens != 20 || ps[0].At != 0 || ps[1].InputTokens != 40 || ps[1].At != 500*time.Millisecond {
		for _, p := range ps {
			t.Logf("%s %v %d", p.ID, p.At, p.InputTokens)
		}
		t.Error("window")
	}
}

// Mooncake: requests sharing leading hash_ids share exactly those blocks
// of text, and differ from the first block they do not share; prompt
// lengths are exact.
func TestMooncakeSharedBlocks(t *testing.T) {
	t.Parallel()
	m, err := LoadMix("../testdata/mixes/trace-mooncake.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		TS     int64   `json:"timestamp"`
		In     int     `json:"input_length"`
		Hashes []int64 `json:"hash_ids"`
	}
	var recs []rec
	f, _ := os.ReadFile("../testdata/mixes/mooncake-excerpt.jsonl")
	for _, l := range strings.Split(strings.TrimSpace(string(f)), "\n") {
		var r rec
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	ps := drainTrace(t, m, 4)
	tok := m.Tokenizer()
	// Token offsets of each block boundary in each prompt.
	blockText := func(p *Prompt, k int) string {
		ids, _, _ := tok.(*tiktoken).codec.Encode(p.Text)
		lo, hi := k*512, min((k+1)*512, len(ids))
		s, _ := tok.(*tiktoken).codec.Decode(ids[lo:hi])
		return s
	}
	checked := 0
	for i := 0; i < len(ps) && checked < 40; i++ {
		if tok.Count(ps[i].Text) != recs[i].In || ps[i].At != time.Duration(recs[i].TS)*time.Millisecond {
			t.Fatalf("row %d: %d tokens at %v, want %d at %dms", i, tok.Count(ps[i].Text), ps[i].At, recs[i].In, recs[i].TS)
		}
		for j := i + 1; j < len(ps); j++ {
			a, b := recs[i].Hashes, recs[j].Hashes
			shared := 0
			for shared < len(a) && shared < len(b) && a[shared] == b[shared] {
				shared++
			}
			if shared == 0 || shared == len(a) || shared == len(b) {
				continue // full blocks only: the last block of each is cut to its length
			}
			for k := 0; k < shared; k++ {
				if blockText(ps[i], k) != blockText(ps[j], k) {
					t.Fatalf("rows %d and %d share hash %d but not block %d's text", i, j, a[k], k)
				}
			}
			if blockText(ps[i], shared) == blockText(ps[j], shared) {
				t.Fatalf("rows %d and %d differ at block %d but share its text", i, j, shared)
			}
			checked++
			break
		}
	}
	if checked < 10 {
		t.Errorf("only %d pairs with shared prefixes checked", checked)
	}
}

func TestTraceSeedChangesTextNotTiming(t *testing.T) {
	t.Parallel()
	m, err := LoadMix("../testdata/mixes/trace-azure.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := drainTrace(t, m, 1), drainTrace(t, m, 2)
	if a[0].Text == b[0].Text || a[5].At != b[5].At || a[5].InputTokens != b[5].InputTokens {
		t.Error("seed should change the text only")
	}
}
