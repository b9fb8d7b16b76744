package ollama

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/ollamatest"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

const prompt = "Write a short story about a lighthouse keeper."

// start skips under the race detector (timing tests), then starts Ollama.
func start(t *testing.T, o ollamatest.Options) *ollamatest.Server {
	t.Helper()
	if raceEnabled {
		t.Skip("timing test against a real server: runs without -race (make test's second pass)")
	}
	return ollamatest.Start(t, o)
}

// load runs a schedule against the server through protocol.Open and
// returns the finalized records in sequence order. base is the server
// root; openai-chat gets /v1.
func load(t *testing.T, s *ollamatest.Server, api, model string, stream bool, maxTokens int, opts loadgen.Options) []*loadgen.Record {
	t.Helper()
	url := s.URL
	if api == "openai-chat" {
		url += "/v1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, m, err := protocol.Open(ctx, protocol.Target{Endpoint: transport.Endpoint{URL: url}, API: api, Model: model, Stream: stream, MaxTokens: maxTokens})
	if err != nil {
		t.Fatalf("open %s: %v", api, err)
	}
	if m != model {
		t.Fatalf("model %q, want %q", m, model)
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	r, err := loadgen.NewRunner(c, &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: prompt}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *loadgen.Record, 1024)
	done := make(chan []*loadgen.Record)
	go func() {
		var recs []*loadgen.Record
		for rec := range out {
			recs = append(recs, rec)
		}
		done <- recs
	}()
	if _, err := r.Run(ctx, out); err != nil {
		t.Fatal(err)
	}
	recs := <-done
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	return recs
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// tailgate runs the tailgate command (built once per test binary) and
// returns its exit code, stdout and stderr.
func tailgate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tailgate-e2e-ollama")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "tailgate")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/tailgate").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("building tailgate: %v", buildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}
