package openai

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// API names accepted in Config.API.
const (
	APIChat        = "openai-chat"        // POST /v1/chat/completions
	APICompletions = "openai-completions" // POST /v1/completions
)

// Defaults for the tuned transport.
const (
	DefaultDialTimeout = 10 * time.Second
	// DefaultMaxIdleConnsPerHost keeps a connection per concurrent stream
	// alive between requests, so reconnects do not land inside TTFT.
	DefaultMaxIdleConnsPerHost = 16384
)

// Config describes one OpenAI-compatible target.
type Config struct {
	// BaseURL is the server root, with or without /v1
	// (http://127.0.0.1:8000, https://host/v1). A URL that already ends in
	// the endpoint path is used as it is.
	BaseURL string
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
	// APIKey is sent as "Authorization: Bearer <key>" and never written
	// into a record.
	APIKey string
	// Headers are extra request headers; HeaderLines more, as "Name: value"
	// (the form of a repeated command-line flag), applied after Headers.
	// Both override the defaults, Authorization included.
	Headers     map[string]string
	HeaderLines []string
	// Insecure skips TLS certificate verification.
	Insecure bool
	// CAFile is a PEM bundle trusted besides the system roots.
	CAFile string
	// KeepText keeps each answer's text in Record.Text (multi-turn
	// sessions build the next turn from it).
	KeepText bool
	// DialTimeout bounds connection setup; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxConnsPerHost caps connections to the target; 0 means no cap, so
	// every concurrent stream gets its own HTTP/1.1 connection.
	MaxConnsPerHost int
	// Transport, when set, replaces the tuned transport (Insecure, CAFile,
	// DialTimeout and MaxConnsPerHost are then ignored).
	Transport http.RoundTripper
}

// Bool returns a pointer to v, for Config.Stream and Config.IncludeUsage.
func Bool(v bool) *bool { return &v }

// Client sends requests to one OpenAI-compatible endpoint. It implements
// loadgen.Client and is safe for concurrent use.
type Client struct {
	url      string
	api      string
	model    string
	stream   bool
	usage    bool
	maxToks  int
	keepText bool
	header   http.Header
	host     string   // from a Host header, which net/http takes from Request.Host
	secrets  []string // values scrubbed from every error message
	http     *http.Client
}

// New checks cfg and returns a client for it.
func New(cfg Config) (*Client, error) {
	c := &Client{
		api:      cfg.API,
		model:    cfg.Model,
		stream:   cfg.Stream == nil || *cfg.Stream,
		usage:    cfg.IncludeUsage == nil || *cfg.IncludeUsage,
		maxToks:  cfg.MaxTokens,
		keepText: cfg.KeepText,
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
	u, err := endpointURL(cfg.BaseURL, endpoint)
	if err != nil {
		return nil, err
	}
	c.url = u

	c.header = http.Header{}
	c.header.Set("Content-Type", "application/json")
	c.header.Set("User-Agent", "tailgate")
	if c.stream {
		c.header.Set("Accept", "text/event-stream")
	} else {
		c.header.Set("Accept", "application/json")
	}
	if k := strings.TrimSpace(cfg.APIKey); k != "" {
		c.header.Set("Authorization", "Bearer "+k)
		c.secrets = append(c.secrets, k)
	}
	for name, value := range cfg.Headers {
		if err := c.addHeader(name, value); err != nil {
			return nil, fmt.Errorf("openai: header %q: %v", name, err)
		}
	}
	for i, line := range cfg.HeaderLines {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			// The value may be a secret: name the line, not its text.
			return nil, fmt.Errorf("openai: header line %d: want \"Name: value\"", i+1)
		}
		if err := c.addHeader(strings.TrimSpace(name), strings.TrimSpace(value)); err != nil {
			return nil, fmt.Errorf("openai: header line %d: %v", i+1, err)
		}
	}

	rt := cfg.Transport
	if rt == nil {
		t, err := newTransport(cfg)
		if err != nil {
			return nil, err
		}
		rt = t
	}
	c.http = &http.Client{Transport: rt}
	return c, nil
}

func (c *Client) addHeader(name, value string) error {
	if name == "" || strings.ContainsAny(name, " \t\r\n:") {
		return errors.New("not a valid header name")
	}
	if strings.ContainsAny(value, "\r\n") {
		return errors.New("value contains a line break")
	}
	if strings.EqualFold(name, "Host") {
		c.host = value
		return nil
	}
	c.header.Set(name, value)
	if strings.EqualFold(name, "Authorization") {
		if _, cred, ok := strings.Cut(value, " "); ok && len(cred) >= 4 {
			c.secrets = append(c.secrets, cred)
		}
	}
	if len(value) >= 8 && looksSecret(name) {
		c.secrets = append(c.secrets, value)
	}
	return nil
}

// looksSecret guesses whether a header carries a credential, so its value
// is scrubbed from error messages as the API key is.
func looksSecret(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "key", "token", "secret", "cookie", "password"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// endpointURL joins base and the endpoint path: base may end in "/",
// "/v1", or the whole endpoint; any other path is kept as a prefix.
func endpointURL(base, endpoint string) (string, error) {
	if strings.TrimSpace(base) == "" {
		return "", errors.New("openai: base URL is empty")
	}
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		// url.Error quotes the input, which may hold user:password.
		return "", errors.New("openai: base URL: cannot parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("openai: base URL %q: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return "", fmt.Errorf("openai: base URL %q: no host", u.Redacted())
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
	return u.String(), nil
}

func newTransport(cfg Config) (*http.Transport, error) {
	dialTimeout := cfg.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: cfg.Insecure}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("openai: CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("openai: CA file %s: no PEM certificates found", cfg.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   dialTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: dialTimeout,
		// HTTP/1.1 only: one stream per connection, so one slow stream's
		// flow-control window cannot delay another's tokens.
		ForceAttemptHTTP2:   false,
		MaxIdleConns:        0, // no global cap; the per-host cap rules
		MaxIdleConnsPerHost: DefaultMaxIdleConnsPerHost,
		MaxConnsPerHost:     cfg.MaxConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		// A gzip reader would hold tokens back until it has a block.
		DisableCompression: true,
		ReadBufferSize:     16 << 10,
	}, nil
}

// APIKeyFromEnvOrFile returns the API key from file when file is set,
// otherwise from $OPENAI_API_KEY (empty if unset), with surrounding white
// space trimmed. Errors name the file, never its contents.
func APIKeyFromEnvOrFile(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv("OPENAI_API_KEY")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("API key file: %w", err) // *PathError names the file
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("API key file %s: empty", file)
	}
	if strings.ContainsAny(key, "\r\n") {
		return "", fmt.Errorf("API key file %s: more than one line", file)
	}
	return key, nil
}

// URL is the endpoint the client posts to.
func (c *Client) URL() string { return c.url }

// CloseIdleConnections closes kept-alive connections, e.g. between runs.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }
