package openai

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// API names accepted in Config.API.
const (
	APIChat        = "openai-chat"        // POST /v1/chat/completions
	APICompletions = "openai-completions" // POST /v1/completions
)

// Config describes one OpenAI-compatible target.
type Config struct {
	// Endpoint's URL is the server root, with or without /v1
	// (http://127.0.0.1:8000, https://host/v1). A URL that already ends in
	// the endpoint path is used as it is. Its user info is sent as basic
	// auth and its query string kept; neither is ever printed. Its Warn
	// gets the notice that the server closes every connection, so none is
	// reused.
	transport.Endpoint
	// API is APIChat (default) or APICompletions.
	API   string
	Model string // sent as "model"; omitted when empty
	// Stream asks for an SSE stream; nil means true.
	Stream *bool
	// MaxTokens is sent as max_tokens when a prompt sets none; 0 sends none.
	MaxTokens int
	// IncludeUsage sends stream_options.include_usage when streaming, so
	// the server reports exact token counts; nil means true.
	IncludeUsage *bool
}

// Bool returns a pointer to v, for Config.Stream and Config.IncludeUsage.
func Bool(v bool) *bool { return &v }

// Client sends requests to one OpenAI-compatible endpoint. It implements
// loadgen.Client, ModelDiscoverer, Preflighter and ServerDescriber, and is
// safe for concurrent use.
type Client struct {
	url     string // the endpoint, credentials and query included: send only
	safeURL string // the endpoint as it may be printed
	api     string
	model   string
	stream  bool
	usage   bool
	maxToks int
	http    *transport.Client
	// lean: requests go on the lean HTTP client, whose bodies take a read
	// deadline; net/http's stop reading only with their context.
	lean bool
}

var (
	_ loadgen.Client          = (*Client)(nil)
	_ loadgen.ModelDiscoverer = (*Client)(nil)
	_ loadgen.Preflighter     = (*Client)(nil)
	_ loadgen.ServerDescriber = (*Client)(nil)
)

// New checks cfg and returns a client for it.
func New(cfg Config) (*Client, error) {
	c := &Client{
		api:     cfg.API,
		model:   cfg.Model,
		stream:  cfg.Stream == nil || *cfg.Stream,
		usage:   cfg.IncludeUsage == nil || *cfg.IncludeUsage,
		maxToks: cfg.MaxTokens,
	}
	if c.api == "" {
		c.api = APIChat
	}
	var endpoint string
	switch c.api {
	case APIChat:
		endpoint = "/v1/chat/completions"
	case APICompletions:
		endpoint = "/v1/completions"
	default:
		return nil, fmt.Errorf("openai: api %q: want %q or %q", cfg.API, APIChat, APICompletions)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("openai: max tokens %d: must not be negative", cfg.MaxTokens)
	}
	u, err := endpointURL(cfg.URL, endpoint)
	if err != nil {
		return nil, err
	}
	c.url, c.safeURL = u.String(), redact.URL(u.String())

	accept := "application/json"
	if c.stream {
		accept = "text/event-stream"
	}
	c.http, err = cfg.Transport.NewClientFor(u, transport.JSONHeaders(accept), cfg.Warn)
	if err == nil {
		c.lean = c.http.LeanFor(c.url)
	}
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return c, nil
}

// endpointURL joins base and the endpoint path: base may end in "/",
// "/v1", or the whole endpoint; any other path is kept as a prefix.
func endpointURL(base, endpoint string) (*url.URL, error) {
	if strings.TrimSpace(base) == "" {
		return nil, errors.New("openai: base URL is empty")
	}
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		// url.Error quotes the input, which may hold user:password.
		return nil, errors.New("openai: base URL: cannot parse (want http://host:port)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("openai: base URL %q: scheme must be http or https", redact.URL(u.String()))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q: no host", redact.URL(u.String()))
	}
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, endpoint):
	case strings.HasSuffix(p, "/v1"):
		p += strings.TrimPrefix(endpoint, "/v1")
	default:
		p += endpoint
	}
	u.Path, u.RawPath = p, ""
	return u, nil
}

// URL is the endpoint the client posts to, redacted: fit to print.
func (c *Client) URL() string { return c.safeURL }

// CloseIdleConnections closes kept-alive connections, e.g. between runs.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }
