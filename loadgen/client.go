package loadgen

import (
	"context"
	"errors"

	"github.com/tailgate-llm/tailgate/prompts"
)

// Client sends one request and fills rec: Sent just before the request is
// written, one Chunk per content-bearing chunk as it arrives (rec.Now()),
// FirstAnswer, token counts, Status, End, and ErrorKind/Error on failure.
// It must return when ctx is done, marking the record ErrCancelled (run
// stopped) or ErrTimeout (per-request deadline). Do is called from many
// goroutines at once.
type Client interface {
	Do(ctx context.Context, p *prompts.Prompt, rec *Record)
}

// ClientFunc adapts a function to Client.
type ClientFunc func(ctx context.Context, p *prompts.Prompt, rec *Record)

// Do calls f.
func (f ClientFunc) Do(ctx context.Context, p *prompts.Prompt, rec *Record) { f(ctx, p, rec) }

// The optional interfaces below are found on a Client by type assertion;
// a protocol implements those its wire format allows.

// ModelDiscoverer is a Client that can ask its server which model to use,
// for runs that name none. SetModel is called before the first Do; it is
// not synchronised with requests in flight.
type ModelDiscoverer interface {
	DiscoverModel(ctx context.Context) (string, error)
	SetModel(model string)
}

// Preflighter is a Client that can check, within seconds, that its target
// answers and serves the model, before a run commits to its schedule. The
// error names the target (redacted) and the model.
type Preflighter interface {
	Preflight(ctx context.Context) error
}

// ModelChecker is a Client that can check, before the load, that its
// target serves every model a mix names (its classes' models and LoRA
// adapters), beyond the run's own that Preflight checks. The error lists
// what the server serves.
type ModelChecker interface {
	CheckModels(ctx context.Context, models []string) error
}

// ErrNotServed marks a Preflight error from a server that answered but
// does not serve the model (errors.Is(err, ErrNotServed)): waiting will
// not help, unlike a server that does not answer yet.
var ErrNotServed = errors.New("model not served")

// NotServed marks err as ErrNotServed, its text unchanged.
func NotServed(err error) error { return notServed{err} }

type notServed struct{ error }

func (e notServed) Is(target error) bool { return target == ErrNotServed }
func (e notServed) Unwrap() error        { return e.error }

// Preconnector is a Client that can open n connections to its target
// before the first intended start (run --preconnect), so the first wave of
// requests does not pay connection set-up inside its latency. It returns
// how many connections it opened.
type Preconnector interface {
	Preconnect(ctx context.Context, n int) (int, error)
}

// ServerDescriber is a Client that can say what its server reports about
// itself, for the evidence pack's environment.json. It never fails: what
// went wrong is in ServerInfo.Error.
type ServerDescriber interface {
	DescribeServer(ctx context.Context) ServerInfo
}

// ServerInfo is what a server reports about itself, as environment.json's
// "server" block. Nothing in it carries a credential.
type ServerInfo struct {
	URL     string            `json:"url"` // redacted: no user info, query masked
	Models  []string          `json:"models,omitempty"`
	Headers map[string]string `json:"headers,omitempty"` // Server and version-bearing headers, lower-case names
	Error   string            `json:"error,omitempty"`   // why the rest is missing, scrubbed
	// What the server says about itself beyond its model list, where it
	// has an endpoint for it (vLLM /version, llama.cpp /props, Ollama
	// /api/version and /api/show, TGI /info): its version or build, how
	// many requests it runs at once (llama.cpp slots), its context
	// length, and the model's details (Ollama: family, parameter size,
	// quantization, format). Absent when it did not say.
	Version       string            `json:"version,omitempty"`
	Slots         int               `json:"slots,omitempty"`
	ContextLength int               `json:"context_length,omitempty"`
	ModelDetails  map[string]string `json:"model_details,omitempty"`
}
