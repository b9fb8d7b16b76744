package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/pipeline"
)

// The bar shows elapsed of total with an ETA, no TTFT before the first
// token, says when the run drains, and clears its line at the end, so no
// longer line leaves residue.
func TestProgressDrawsAndClears(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, "stage peak 2/3")
	p.Update(pipeline.ProgressState{Elapsed: time.Second, Total: 6 * time.Second, Sent: 3, Done: 0})
	if first := b.String(); !strings.Contains(first, "p99 TTFT -") {
		t.Errorf("a TTFT shown before any token: %q", first)
	}
	p.Update(pipeline.ProgressState{Elapsed: 2 * time.Second, Total: 6 * time.Second, Sent: 10, Done: 8, Failed: 1,
		TTFTP99: 42 * time.Millisecond, HasTTFT: true})
	second := b.String()
	if !strings.Contains(second, "stage peak 2/3") || !strings.Contains(second, "sent 10") || !strings.Contains(second, "33%") ||
		!strings.Contains(second, "p99 TTFT 42.0 ms") {
		t.Errorf("second frame %q", second)
	}
	p.Update(pipeline.ProgressState{Elapsed: 7 * time.Second, Total: 6 * time.Second, Sent: 20, Done: 18, Failed: 1})
	if !strings.Contains(b.String(), "draining: 2 in flight") || strings.Contains(b.String(), "100%") {
		t.Errorf("drain frame %q", b.String())
	}
	b.Reset()
	p.Finish()
	if out := b.String(); !strings.HasSuffix(strings.TrimRight(out, " "), "\r") {
		t.Errorf("finish did not clear the line: %q", out)
	}
}
