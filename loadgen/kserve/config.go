package kserve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// APIGRPC is the --api name of this protocol.
const APIGRPC = "kserve-grpc"

// DefaultPort is Triton's gRPC port, used when the target names none.
const DefaultPort = "8001"

// maxMessageBytes bounds a received message (a whole non-streamed answer).
const maxMessageBytes = 64 << 20

// Config describes one KServe v2 gRPC target.
type Config struct {
	// Endpoint's URL is host:port, or a URL: grpc:// or http:// for plain
	// HTTP/2, grpcs:// or https:// for TLS. The port defaults to 8001
	// (Triton's); a URL path is not allowed (gRPC has none). Its
	// Transport is TLS (CA, Insecure, client certificate for mTLS), the
	// API key (sent as "authorization: Bearer …" metadata, never printed)
	// and extra headers, sent as metadata; a "Host" line sets the
	// :authority. Proxies, MaxConnsPerHost and RoundTripper do not apply.
	// Its Warn gets once-only notices: a decoupled model that refuses
	// ModelInfer (GenerateClient: a server that closes every connection).
	transport.Endpoint
	// Model is the model name (required: the protocol has no model list in
	// the RPCs the client uses); Version is its version, empty for the
	// server's choice.
	Model, Version string
	// Stream uses ModelStreamInfer (decoupled models, one response per
	// piece of text); false asks for one response, by ModelInfer, or over
	// ModelStreamInfer once a decoupled model (the vLLM backend's) has
	// refused ModelInfer. nil means true.
	Stream *bool
	// MaxTokens is sent when a prompt sets none; 0 sends none (the
	// TensorRT-LLM ensemble then fails: it requires max_tokens).
	MaxTokens int
	// Tensors is the backend's tensor convention; TensorsAuto reads it
	// from the model's metadata in Preflight.
	Tensors Tensors
	// Connections is how many HTTP/2 connections the requests spread over,
	// round robin: a server's limit on concurrent streams per connection
	// (often 100) caps the load one connection can carry. 0 means 1.
	Connections int
	// Keepalive, when positive, pings an idle connection this often (and
	// drops it when a ping goes unanswered for as long). Servers refuse
	// pings more often than they allow (Triton: 5 minutes by default)
	// with GOAWAY, so leave it 0 unless the server is set to accept it.
	Keepalive time.Duration
}

// Bool returns a pointer to v, for Config.Stream.
func Bool(v bool) *bool { return &v }

// Client sends requests to one KServe v2 gRPC endpoint. It implements
// loadgen.Client, ModelDiscoverer, Preflighter and ServerDescriber, and is
// safe for concurrent use.
type Client struct {
	safeTarget string
	model      string
	version    string
	stream     bool
	maxToks    int
	tensors    Tensors
	md         metadata.MD
	// mdPairs is md as key, value pairs, less x-request-id, which each
	// request sets: a request's metadata is one context layer over them.
	mdPairs []string
	secrets []string
	spec    atomic.Pointer[modelSpec]
	warn    func(string)
	// unaryOverStream: the model refused ModelInfer as decoupled, so
	// unstreamed requests go over ModelStreamInfer.
	unaryOverStream atomic.Bool

	codec frameCodec
	// streamOpts are a stream's call options, made once.
	streamOpts []grpc.CallOption
	shapes     templates
	conns      []*grpc.ClientConn
	clients    []pb.GRPCInferenceServiceClient
	next       atomic.Uint64
}

var (
	_ loadgen.Client          = (*Client)(nil)
	_ loadgen.ModelDiscoverer = (*Client)(nil)
	_ loadgen.Preflighter     = (*Client)(nil)
	_ loadgen.ServerDescriber = (*Client)(nil)
)

// New checks cfg and returns a client for it. Connections are made on the
// first request; Close closes them.
func New(cfg Config) (*Client, error) {
	addr, useTLS, err := parseTarget(cfg.URL)
	if err != nil {
		return nil, err
	}
	switch cfg.Tensors {
	case TensorsAuto, TensorsVLLM, TensorsTRTLLM:
	default:
		return nil, fmt.Errorf("kserve: tensors %q: want %q or %q", cfg.Tensors, TensorsVLLM, TensorsTRTLLM)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("kserve: max tokens %d: must not be negative", cfg.MaxTokens)
	}
	if cfg.Connections < 0 {
		return nil, fmt.Errorf("kserve: connections %d: must not be negative", cfg.Connections)
	}
	scheme := "grpc://"
	if useTLS {
		scheme = "grpcs://"
	}
	c := &Client{safeTarget: scheme + addr, model: cfg.Model, version: cfg.Version,
		stream: cfg.Stream == nil || *cfg.Stream, maxToks: cfg.MaxTokens, tensors: cfg.Tensors}
	c.spec.Store(defaultSpec(cfg.Tensors))
	c.codec = newFrameCodec()
	c.streamOpts = []grpc.CallOption{grpc.StaticMethod(), grpc.ForceCodecV2(c.codec)}
	if cfg.Warn != nil {
		c.warn = func(msg string) { cfg.Warn(c.safeTarget + ": " + msg) }
	}

	hs, err := cfg.Transport.HeaderSet(nil)
	if err != nil {
		return nil, fmt.Errorf("kserve: %w", err)
	}
	c.secrets = hs.Secrets
	c.md = metadata.MD{}
	for name, vals := range hs.Header {
		c.md[strings.ToLower(name)] = vals
	}
	for _, k := range slices.Sorted(maps.Keys(c.md)) {
		if k == requestIDKey {
			continue
		}
		for _, v := range c.md[k] {
			c.mdPairs = append(c.mdPairs, k, v)
		}
	}
	opts := []grpc.DialOption{
		grpc.WithUserAgent(version.UserAgent()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes)),
		// Two streams' tokens on one connection must not wait for each
		// other's flow-control window: start every stream with a large one.
		grpc.WithInitialWindowSize(1 << 20),
		grpc.WithInitialConnWindowSize(16 << 20),
	}
	if hs.Host != "" {
		opts = append(opts, grpc.WithAuthority(hs.Host))
	}
	if useTLS {
		tc, err := cfg.Transport.TLSConfig()
		if err != nil {
			return nil, fmt.Errorf("kserve: %w", err)
		}
		tc.NextProtos = []string{"h2"}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	} else {
		if cfg.Transport.CertFile != "" || cfg.Transport.CAFile != "" {
			return nil, fmt.Errorf("kserve: target %s is plaintext but TLS files are given: use grpcs://", c.safeTarget)
		}
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if cfg.Keepalive > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.Keepalive, Timeout: cfg.Keepalive}))
	}
	dialTimeout := cfg.Transport.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = transport.DefaultDialTimeout
	}
	opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
		d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
		return d.DialContext(ctx, "tcp", a)
	}))
	n := max(cfg.Connections, 1)
	for range n {
		// passthrough: the address is dialled as given, one connection per
		// ClientConn, so Connections is the number of TCP connections.
		cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("kserve: target %s: %w", c.safeTarget, err)
		}
		c.conns = append(c.conns, cc)
		c.clients = append(c.clients, pb.NewGRPCInferenceServiceClient(cc))
	}
	return c, nil
}

// parseTarget reads host:port or a grpc(s)/http(s) URL.
func parseTarget(s string) (addr string, useTLS bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", false, errors.New("kserve: target is empty (want host:port or grpc://host:port)")
	}
	if strings.Contains(s, "://") {
		u, perr := url.Parse(s)
		if perr != nil {
			return "", false, errors.New("kserve: target: cannot parse (want grpc://host:port)")
		}
		switch u.Scheme {
		case "grpc", "http":
		case "grpcs", "https":
			useTLS = true
		default:
			return "", false, fmt.Errorf("kserve: target %q: scheme must be grpc, grpcs, http or https", redact.URL(s))
		}
		if u.User != nil {
			return "", false, &field.Error{Field: "Headers", Hint: "use {} or the API key",
				Err: fmt.Errorf("kserve: target %q: user info is not sent over gRPC", redact.URL(s))}
		}
		if p := strings.Trim(u.Path, "/"); p != "" {
			return "", false, fmt.Errorf("kserve: target %q: gRPC targets have no path", redact.URL(s))
		}
		s = u.Host
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.Trim(s, "[]"), DefaultPort
		if useTLS {
			port = "443"
		}
	}
	if host == "" {
		return "", false, fmt.Errorf("kserve: target %q: no host", redact.URL(s))
	}
	return net.JoinHostPort(host, port), useTLS, nil
}

// Target is the endpoint, fit to print.
func (c *Client) Target() string { return c.safeTarget }

// Close closes the client's connections.
func (c *Client) Close() error {
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}

// pick returns the next connection's client, round robin.
func (c *Client) pick() pb.GRPCInferenceServiceClient { return c.clients[c.pickIndex()] }

// pickIndex returns the next connection's index, round robin.
func (c *Client) pickIndex() int {
	if len(c.conns) == 1 {
		return 0
	}
	return int((c.next.Add(1) - 1) % uint64(len(c.conns)))
}

// requestIDKey is the metadata key of the request's id.
const requestIDKey = "x-request-id"

// outgoing adds the client's metadata (headers, API key) to ctx, and the
// request's id as x-request-id, in place of any header of that name.
func (c *Client) outgoing(ctx context.Context, requestID string) context.Context {
	if requestID == "" {
		return metadata.NewOutgoingContext(ctx, c.md)
	}
	if len(c.mdPairs) == 0 {
		return metadata.AppendToOutgoingContext(ctx, requestIDKey, requestID)
	}
	// Appended pairs are sent as they are, without copying the client's
	// metadata map for each request.
	kv := make([]string, len(c.mdPairs), len(c.mdPairs)+2)
	copy(kv, c.mdPairs)
	return metadata.AppendToOutgoingContext(ctx, append(kv, requestIDKey, requestID)...)
}

// scrub removes every credential the client holds from s.
func (c *Client) scrub(s string) string { return redact.Text(s, c.secrets...) }
