package exporters

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

func TestWriteTextReport(t *testing.T) {
	m := loadgen.NewMetrics()
	for i := 0; i < 4; i++ {
		r := &loadgen.Record{Class: []string{"chat", "rag"}[i%2], Intended: 0, Sent: 0, End: 100 * time.Millisecond,
			Chunks: []loadgen.Chunk{{At: 20 * time.Millisecond}, {At: 40 * time.Millisecond}}}
		r.Finalize()
		m.Add(r)
	}
	m.Add(&loadgen.Record{Class: "chat", ErrorKind: loadgen.ErrRateLimited, End: time.Millisecond})
	s := m.Summary(loadgen.Info{Started: time.Unix(0, 0), Elapsed: time.Second, Interrupted: true},
		loadgen.SummaryMeta{Version: "v", Target: "http://x", API: "openai-chat", Model: "m"})
	var b bytes.Buffer
	if err := WriteText(&b, &results.Summary{Summary: *s}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"target http://x", "INTERRUPTED", "sent 5  ok 4  errors 1", "rate_limited=1",
		"ttft", "e2e", "class", "chat", "rag"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ttfat") {
		t.Errorf("ttfat shown though no reasoning tokens:\n%s", out)
	}
}
