// Package protocol maps --api names to protocol clients, so a new protocol
// is one package under loadgen/ and one row here.
//
// A protocol package provides a client that implements loadgen.Client
// (one prompt in, one Record filled: Sent, a Chunk per content-bearing
// piece as it arrives, FirstAnswer, token counts, End, and an ErrorKind
// from loadgen's protocol-neutral list on failure) and the three side
// interfaces of Client below. It shares loadgen/transport's Config (TLS,
// headers, API key) through transport.Endpoint, which every protocol's
// Config embeds, and scrubs credentials from every error.
package protocol

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/ollama"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/tgi"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// Target is one endpoint, whatever its protocol.
type Target struct {
	// Endpoint is the URL, TLS, headers, the API key (see APIKeyFile) and
	// where once-only notices go (a server that closes every connection).
	transport.Endpoint
	API, Model string
	// MaxTokens is sent when a prompt sets none; 0 sends none.
	MaxTokens int
	// Stream asks for a streamed answer.
	Stream bool
	// APIKeyFile holds the API key when Transport.APIKey is empty: New
	// reads it, or, when it is "" too, $TAILGATE_API_KEY, then
	// $OPENAI_API_KEY (transport.APIKeyFromEnvOrFile).
	APIKeyFile string
	// Connections is how many connections a multiplexing protocol (gRPC)
	// spreads its streams over; 0 means 1. HTTP/1.1 protocols ignore it.
	Connections int
	// Keepalive, when positive, pings idle gRPC connections this often.
	Keepalive time.Duration
}

// Client is what every protocol client offers besides sending requests:
// the model discovery, preflight and server description that run and
// validate use.
type Client interface {
	loadgen.Client
	loadgen.ModelDiscoverer
	loadgen.Preflighter
	loadgen.ServerDescriber
}

// Preparer is a Client that must learn about its target before the run
// (the KServe client reads the model's readiness and tensors). Open calls
// Prepare once, after the model is known and before the schedule starts,
// in place of Preflight (Prepare checks what Preflight would); an error
// stops the run. Prepare must be safe to call while Do runs: the canary
// probes a target that was down at start and asks it to prepare again
// until it has.
type Preparer interface {
	Prepare(ctx context.Context) error
}

// constructors is the table: one row per --api name.
var constructors = map[string]func(Target) (Client, error){
	openai.APIChat:        newOpenAI,
	openai.APICompletions: newOpenAI,
	kserve.APIGRPC:        newKServe,
	kserve.APIGenerate:    newGenerate,
	tgi.API:               newTGI,
	ollama.API:            newOllama,
}

func newTGI(t Target) (Client, error) {
	return tgi.New(tgi.Config{Endpoint: t.Endpoint, Model: t.Model, Stream: &t.Stream, MaxTokens: t.MaxTokens})
}

func newOllama(t Target) (Client, error) {
	return ollama.New(ollama.Config{Endpoint: t.Endpoint, Model: t.Model, Stream: &t.Stream, MaxTokens: t.MaxTokens})
}

func newGenerate(t Target) (Client, error) {
	return kserve.NewGenerate(kserve.Config{Endpoint: t.Endpoint, Model: t.Model, Stream: kserve.Bool(t.Stream),
		MaxTokens: t.MaxTokens})
}

func newKServe(t Target) (Client, error) {
	return kserve.New(kserve.Config{Endpoint: t.Endpoint, Model: t.Model, Stream: kserve.Bool(t.Stream),
		MaxTokens: t.MaxTokens, Connections: t.Connections, Keepalive: t.Keepalive})
}

func newOpenAI(t Target) (Client, error) {
	return openai.New(openai.Config{Endpoint: t.Endpoint, API: t.API, Model: t.Model, Stream: openai.Bool(t.Stream),
		MaxTokens: t.MaxTokens})
}

// New builds the client for t.API, with t's API key (ReadAPIKey).
func New(t Target) (Client, error) {
	mk, ok := constructors[t.API]
	if !ok {
		return nil, field.Errorf("API", "%q: want one of %s", t.API, strings.Join(Names(), ", "))
	}
	if err := t.ReadAPIKey(); err != nil {
		return nil, err
	}
	return mk(t)
}

// ReadAPIKey sets t.Transport.APIKey, when it is empty, from APIKeyFile or
// the environment. New calls it; a command that sends requests of its own
// with the key (a server's /metrics) calls it first. Errors name the file,
// never the key.
func (t *Target) ReadAPIKey() error {
	if t.Transport.APIKey != "" {
		return nil
	}
	key, err := transport.APIKeyFromEnvOrFile(t.APIKeyFile)
	t.Transport.APIKey = key
	return err
}

// Names lists the --api names, sorted.
func Names() []string {
	n := make([]string, 0, len(constructors))
	for k := range constructors {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// ConfigError is an Open error in the target's description (an unknown
// --api, a bad URL, an unreadable CA file): the server was not asked.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Open is the one way a command gets a client that is ready to send: it
// builds the client for t.API, asks the server for its model when t.Model
// is empty (else checks, within seconds, that the server answers and
// serves it: Preflight), then lets a Preparer learn what it needs of the
// model. It returns the client and the model requests will name. Every
// failure says why in the server's words: a *ConfigError when the target
// cannot be built, else an error for which errors.Is(err,
// loadgen.ErrNotServed) says whether the server answered but lacks the
// model (as opposed to not answering).
func Open(ctx context.Context, t Target) (Client, string, error) {
	c, err := New(t)
	if err != nil {
		return nil, "", &ConfigError{err}
	}
	model, err := Check(ctx, c, t.Model)
	return c, model, err
}

// CheckModels checks, before the load, that the target serves every
// model the mix names (prompts.Mix.Models), for a client that can tell
// (loadgen.ModelChecker); other clients pass.
func CheckModels(ctx context.Context, c Client, models []string) error {
	if mc, ok := c.(loadgen.ModelChecker); ok && len(models) > 0 {
		return mc.CheckModels(ctx, models)
	}
	return nil
}

// Check is Open's part after the client is built, for a command that
// builds the client first and checks the target later (validate checks
// it as its first stage): discovery when model is empty, Preflight, and
// Prepare. It returns the model requests will name.
func Check(ctx context.Context, c Client, model string) (string, error) {
	p, prepares := c.(Preparer)
	switch {
	case model == "":
		m, err := c.DiscoverModel(ctx)
		if err != nil {
			return "", field.Errorf("Model", "not given and %w", err)
		}
		model = m
		c.SetModel(model)
	case !prepares:
		if err := c.Preflight(ctx); err != nil {
			return model, err
		}
	}
	if prepares {
		if err := p.Prepare(ctx); err != nil {
			return model, err
		}
	}
	return model, nil
}
