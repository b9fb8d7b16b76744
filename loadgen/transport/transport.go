// Package transport is what every HTTP protocol client shares: the tuned
// connection pool (TLS, CA bundle, proxies), the header set, the retry of a
// request that a server's silently closed keep-alive connection lost, how a
// failure maps to a loadgen.ErrorKind, the scrubbing of credentials from
// every error text, and one request's path through them (Send: the
// X-Request-Id, Sent, retries, the status and its error; ReadWhole,
// ClassifyBody, Fetch; RootConfig for a protocol on a server root). A
// protocol package (openai, tgi, ollama, kserve) owns only its wire format.
package transport

import (
	"context"
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

	"github.com/tailgate-llm/tailgate/internal/redact"
)

// Defaults for the tuned transport.
const (
	DefaultDialTimeout = 10 * time.Second
	// DefaultMaxIdleConnsPerHost keeps a connection per concurrent stream
	// alive between requests, so reconnects do not land inside TTFT.
	DefaultMaxIdleConnsPerHost = 16384
)

// Endpoint is one target, whatever its protocol: where it is, how to
// reach it (TLS, headers, the API key) and where its notices go. Every
// protocol's Config embeds it.
type Endpoint struct {
	// URL is the target. HTTP protocols take the server root
	// (http://host:port[/prefix]); package openai also takes the root
	// with /v1 or the endpoint's whole URL, kserve-grpc host:port or a
	// grpc://, grpcs://, http:// or https:// URL. User info in an HTTP
	// URL is sent as basic auth; it is never printed.
	URL string
	// Transport is TLS, CA, headers, the API key (sent as a bearer token,
	// never printed), proxies and the connection pool.
	Transport Config
	// Warn, if not nil, gets once-only notices for the user (a server that
	// closes every connection, a model that refuses ModelInfer). It may
	// be called from any goroutine.
	Warn func(msg string)
}

// Config is how to reach a target, whatever its protocol. The zero value
// is a plain-HTTP client with proxies from the environment.
type Config struct {
	// Insecure skips TLS certificate verification.
	Insecure bool
	// CAFile is a PEM bundle trusted besides the system roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, sent
	// for mutual TLS; both or neither.
	CertFile, KeyFile string
	// Headers are extra request headers as "Name: value" lines (the form
	// of a repeated --header flag). They override the protocol's defaults
	// and the API key's Authorization. A "Host" line sets the request's
	// Host. Values that look like credentials are scrubbed from errors.
	Headers []string
	// APIKey is sent as "Authorization: Bearer <key>". It is never
	// printed: every error text a client makes is scrubbed of it.
	APIKey string
	// DialTimeout bounds connection setup (dial and TLS handshake);
	// 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxConnsPerHost caps connections to the target; 0 means no cap, so
	// every concurrent stream gets its own HTTP/1.1 connection.
	MaxConnsPerHost int
	// Proxy chooses a proxy per request; nil means the environment's
	// (HTTP_PROXY, HTTPS_PROXY, NO_PROXY).
	Proxy func(*http.Request) (*url.URL, error)
	// Dial, if set, opens every connection instead of TCP (tests reach
	// simulators over in-memory pipes, internal/pipenet); DialTimeout
	// still bounds the TLS handshake.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// RoundTripper, when set, replaces the tuned transport; Insecure,
	// CAFile, DialTimeout, Dial, MaxConnsPerHost and Proxy are then ignored.
	// Retries on a fresh connection use it too.
	RoundTripper http.RoundTripper
	// HTTPClient chooses the HTTP/1.1 client: HTTPClientNetHTTP (also
	// ""), HTTPClientLean or HTTPClientAuto (--http-client).
	HTTPClient string
}

// TLSConfig is the TLS client configuration of c: verification (or
// Insecure), the CA bundle beside the system roots, and the client
// certificate for mutual TLS. HTTP and gRPC clients share it.
func (c Config) TLSConfig() (*tls.Config, error) {
	tlsCfg := &tls.Config{InsecureSkipVerify: c.Insecure}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err) // *PathError names the file
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificates found", c.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			// The error names neither file's contents, only what is wrong.
			return nil, fmt.Errorf("client certificate %s / key %s: %w", c.CertFile, c.KeyFile, err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	case c.CertFile != "" || c.KeyFile != "":
		return nil, errors.New("client certificate: give both the certificate and the key file")
	}
	return tlsCfg, nil
}

// Transport builds the tuned *http.Transport for c.
func (c Config) Transport() (*http.Transport, error) {
	dialTimeout := c.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	tlsCfg, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	proxy := c.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Transport{
		Proxy:               proxy,
		DialContext:         dial,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: dialTimeout,
		// HTTP/1.1 only: one stream per connection, so one slow stream's
		// flow-control window cannot delay another's tokens.
		ForceAttemptHTTP2:   false,
		MaxIdleConns:        0, // no global cap; the per-host cap rules
		MaxIdleConnsPerHost: DefaultMaxIdleConnsPerHost,
		MaxConnsPerHost:     c.MaxConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		// A gzip reader would hold tokens back until it has a block.
		DisableCompression: true,
		// The connection's reader holds response headers; stream bodies
		// are read by the protocol's own 16 KiB scanner, which bufio lets
		// read past this buffer. A larger one would cost every in-flight
		// stream its size for no throughput (bench-peers' memory and
		// streamed steps).
		ReadBufferSize: 4 << 10,
		// net/http's server default, not its client's 10 MB: a server
		// that sends a huge head is broken, and every stream holds it.
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}, nil
}

// MaxResponseHeaderBytes bounds an answer's head on both HTTP clients
// (http.DefaultMaxHeaderBytes); a longer one fails the request as
// protocol, with what was read of it let go.
const MaxResponseHeaderBytes = http.DefaultMaxHeaderBytes

// MaxResponseHeaderLineBytes bounds one line of an answer's head on the
// lean client. net/http's parser holds a whole line in memory, so the head
// limit alone lets each of N streams hold a line of MaxResponseHeaderBytes;
// proxies in front of model servers refuse far shorter lines, so a longer
// one is a broken server.
const MaxResponseHeaderLineBytes = 64 << 10

// HeaderSet is a Config's headers made ready to send.
type HeaderSet struct {
	Header http.Header // clone it per request
	Host   string      // from a "Host" line: net/http takes it from Request.Host
	// Secrets are the credential values to scrub from error text: the API
	// key, Authorization credentials, values of credential-like headers.
	Secrets []string
}

// HeaderSet layers the headers: defaults (the protocol's Content-Type,
// Accept, User-Agent), then the API key's Authorization, then c.Headers.
// Errors name the line by number, never its text, which may be a secret.
func (c Config) HeaderSet(defaults http.Header) (HeaderSet, error) {
	hs := HeaderSet{Header: defaults.Clone()}
	if hs.Header == nil {
		hs.Header = http.Header{}
	}
	if k := strings.TrimSpace(c.APIKey); k != "" {
		hs.Header.Set("Authorization", "Bearer "+k)
		hs.Secrets = append(hs.Secrets, k)
	}
	for i, line := range c.Headers {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return HeaderSet{}, fmt.Errorf("header line %d: want \"Name: value\"", i+1)
		}
		if err := hs.add(strings.TrimSpace(name), strings.TrimSpace(value)); err != nil {
			return HeaderSet{}, fmt.Errorf("header line %d: %w", i+1, err)
		}
	}
	return hs, nil
}

func (hs *HeaderSet) add(name, value string) error {
	if name == "" || strings.ContainsAny(name, " \t\r\n:") {
		return errors.New("not a valid header name")
	}
	if strings.ContainsAny(value, "\r\n") {
		return errors.New("value contains a line break")
	}
	if strings.EqualFold(name, "Host") {
		hs.Host = value
		return nil
	}
	hs.Header.Set(name, value)
	if strings.EqualFold(name, "Authorization") {
		if _, cred, ok := strings.Cut(value, " "); ok && len(cred) >= 4 {
			hs.Secrets = append(hs.Secrets, cred)
		}
	}
	if len(value) >= 8 && redact.SecretName(name) {
		hs.Secrets = append(hs.Secrets, value)
	}
	return nil
}

// URLSecrets returns the password in u's user info, for the scrub list:
// net/http sends it as basic auth and some errors quote it bare.
func URLSecrets(u *url.URL) []string {
	if u == nil || u.User == nil {
		return nil
	}
	if p, ok := u.User.Password(); ok && p != "" {
		return []string{p}
	}
	return nil
}
