package pipeline

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// The bar shows elapsed of total with an ETA, says when the run drains,
// and clears its line at the end, so no longer line leaves residue.
func TestProgressDrawsAndClears(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "stage peak 2/3")
	m := loadgen.NewMetrics()
	p.update(2*time.Second, 6*time.Second, 10, 8, 1, m)
	first := b.String()
	if !strings.Contains(first, "stage peak 2/3") || !strings.Contains(first, "sent 10") || !strings.Contains(first, "33%") {
		t.Errorf("first frame %q", first)
	}
	p.update(7*time.Second, 6*time.Second, 20, 18, 1, m)
	if !strings.Contains(b.String(), "draining: 2 in flight") || strings.Contains(b.String(), "100%") {
		t.Errorf("drain frame %q", b.String())
	}
	b.Reset()
	p.finish()
	if out := b.String(); !strings.HasSuffix(strings.TrimRight(out, " "), "\r") {
		t.Errorf("finish did not clear the line: %q", out)
	}
}
