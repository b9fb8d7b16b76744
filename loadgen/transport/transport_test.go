package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/loopbacktest"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
)

func TestStatusKind(t *testing.T) {
	for code, want := range map[int]loadgen.ErrorKind{
		400: loadgen.ErrClient, 401: loadgen.ErrClient, 404: loadgen.ErrClient, 429: loadgen.ErrRateLimited,
		500: loadgen.ErrServer, 503: loadgen.ErrServer, 302: loadgen.ErrProtocol, 101: loadgen.ErrProtocol,
	} {
		if got := StatusKind(code); got != want {
			t.Errorf("StatusKind(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestResponseKind: a 503 is load shed (rate_limited) only when its body
// says so (Ollama's OLLAMA_MAX_QUEUE answer, in its native and its OpenAI
// shape); other 503s stay server_error.
func TestResponseKind(t *testing.T) {
	for _, tt := range []struct {
		code int
		body string
		want loadgen.ErrorKind
	}{
		{503, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`, loadgen.ErrRateLimited},
		{503, `{"error":{"message":"server busy, please try again.  maximum pending requests exceeded","type":"api_error"}}`, loadgen.ErrRateLimited},
		{503, `{"error":"Model is Overloaded"}`, loadgen.ErrRateLimited},
		{503, ``, loadgen.ErrServer},
		{503, `no healthy upstream`, loadgen.ErrServer},
		{503, `{"error":{"message":"simulated overload (fault http_503)"}}`, loadgen.ErrServer},
		{500, `server busy`, loadgen.ErrServer},
		{429, ``, loadgen.ErrRateLimited},
		{404, `server busy`, loadgen.ErrClient},
	} {
		if got := ResponseKind(tt.code, []byte(tt.body)); got != tt.want {
			t.Errorf("ResponseKind(%d, %q) = %q, want %q", tt.code, tt.body, got, tt.want)
		}
	}
}

func TestClassify(t *testing.T) {
	live := context.Background()
	expired, cancel := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancel()
	stopped, stop := context.WithCancel(live)
	stop()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, tt := range []struct {
		ctx  context.Context
		err  error
		kind loadgen.ErrorKind
		msg  string
	}{
		{expired, io.EOF, loadgen.ErrTimeout, "request deadline exceeded before the response"},
		{stopped, io.EOF, loadgen.ErrCancelled, "cancelled (run stopped) before the response"},
		{live, fmt.Errorf("read: %w", context.DeadlineExceeded), loadgen.ErrTimeout, "timed out before the response: read: context deadline exceeded"},
		{live, io.ErrUnexpectedEOF, loadgen.ErrConnect, "connection closed before the response"},
		{live, &neturl.Error{Op: "Post", URL: "http://user:SECRET@h/v1", Err: refused}, loadgen.ErrConnect, "before the response: dial tcp: connect: connection refused"},
	} {
		kind, msg := Classify(tt.ctx, tt.err, "before the response")
		if kind != tt.kind || msg != tt.msg {
			t.Errorf("Classify(%v) = %q %q, want %q %q", tt.err, kind, msg, tt.kind, tt.msg)
		}
	}
}

func TestHeaderSet(t *testing.T) {
	defaults := http.Header{"Accept": {"text/event-stream"}, "User-Agent": {version.UserAgent()}}
	c := Config{APIKey: " sk-key-1 \n", Headers: []string{"X-Tenant: a", "User-Agent: mine", "Host: api.example",
		"X-Api-Key: secret-value-123", "X-Short-Token: abc"}}
	hs, err := c.HeaderSet(defaults)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"Authorization": "Bearer sk-key-1", "Accept": "text/event-stream",
		"User-Agent": "mine", "X-Tenant": "a", "X-Api-Key": "secret-value-123", "Host": ""} {
		if got := hs.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if hs.Host != "api.example" || defaults.Get("User-Agent") != version.UserAgent() {
		t.Errorf("Host %q; defaults changed: %v", hs.Host, defaults)
	}
	if got := strings.Join(hs.Secrets, ","); got != "sk-key-1,secret-value-123" {
		t.Errorf("secrets %q", got)
	}
	// An Authorization line replaces the API key's and its credential is
	// scrubbed too.
	hs, _ = Config{APIKey: "sk-key-1", Headers: []string{"Authorization: Basic dXNlcjpwYXNz"}}.HeaderSet(nil)
	if hs.Header.Get("Authorization") != "Basic dXNlcjpwYXNz" || !strings.Contains(strings.Join(hs.Secrets, ","), "dXNlcjpwYXNz") {
		t.Errorf("Authorization %q, secrets %v", hs.Header.Get("Authorization"), hs.Secrets)
	}
	for _, bad := range []string{"Authorization Bearer hunter2", "Bad Name: hunter2", "X-A: hunter2\r\nX-B: c"} {
		_, err := Config{Headers: []string{"X-Ok: 1", bad}}.HeaderSet(nil)
		if err == nil || !strings.Contains(err.Error(), "header line 2") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestScrub(t *testing.T) {
	cl, err := Config{APIKey: "sk-SECRET-1", Headers: []string{"X-Auth-Token: SECRET-token"}}.NewClient(nil, nil, "pw-SECRET")
	if err != nil {
		t.Fatal(err)
	}
	got := cl.Scrub(`Post "http://u:pw-SECRET@h:1/v1?key=SECRET": echo sk-SECRET-1 SECRET-token pw-SECRET`)
	if strings.Contains(got, "SECRET") || !strings.Contains(got, "http://h:1/v1?") {
		t.Errorf("Scrub left %q", got)
	}
}

func TestTransportConfig(t *testing.T) {
	tr, err := Config{Insecure: true, MaxConnsPerHost: 7}.Transport()
	if err != nil {
		t.Fatal(err)
	}
	if !tr.TLSClientConfig.InsecureSkipVerify || tr.MaxConnsPerHost != 7 || tr.MaxIdleConnsPerHost != DefaultMaxIdleConnsPerHost ||
		!tr.DisableCompression || tr.ForceAttemptHTTP2 || tr.Proxy == nil {
		t.Errorf("transport %+v", tr)
	}
	// Proxies come from the environment unless set.
	t.Setenv("HTTP_PROXY", "http://proxy.example:3128")
	t.Setenv("NO_PROXY", "")
	req, _ := http.NewRequest(http.MethodGet, "http://target.example/v1/models", nil)
	if u, err := tr.Proxy(req); err != nil || u == nil || u.Host != "proxy.example:3128" {
		t.Errorf("proxy %v, %v", u, err)
	}
	if _, err := (Config{CAFile: "/nonexistent/ca.pem"}).Transport(); err == nil || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Errorf("missing CA file: %v", err)
	}
}

// closingServer answers the first request on each connection and closes
// the connection, without answering, when a second request arrives on it:
// a server that closes after every response, made deterministic (the
// client always finds the connection idle and alive when it reuses it).
func closingServer(t *testing.T) (url string, requests func() int) {
	t.Helper()
	var mu sync.Mutex
	served := 0
	addr := loopbacktest.Serve(t, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		for n := 0; ; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if n > 0 {
				return // closed "idle" connection
			}
			mu.Lock()
			served++
			mu.Unlock()
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return "http://" + addr + "/v1/x", func() int { mu.Lock(); defer mu.Unlock(); return served }
}

func TestRetryOnClosedIdleConnection(t *testing.T) {
	for _, kind := range []string{HTTPClientNetHTTP, HTTPClientLean} {
		t.Run(kind, func(t *testing.T) { testRetryOnClosedIdleConnection(t, kind) })
	}
}

func testRetryOnClosedIdleConnection(t *testing.T, kind string) {
	url, served := closingServer(t)
	var warnings []string
	cl, err := Config{HTTPClient: kind}.NewClient(nil, func(m string) { warnings = append(warnings, m) })
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	var retries []int
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, err := cl.NewRequest(ctx, http.MethodPost, url, strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, n, err := cl.Do(req)
		if err != nil {
			t.Fatalf("request %d lost: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if string(b) != "ok" {
			t.Fatalf("request %d: body %q", i, b)
		}
		retries = append(retries, n)
	}
	// Fresh, reused-and-retried, fresh, …; the third failure in a row on a
	// reused connection stops reuse: no retries after it.
	if got, want := fmt.Sprint(retries), "[0 1 0 1 0 1 0 0 0 0]"; got != want {
		t.Errorf("retries %s, want %s", got, want)
	}
	if served() != 10 {
		t.Errorf("server answered %d requests, want 10", served())
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "no longer reusing connections") || !cl.Closing() {
		t.Errorf("warnings %q, closing %v", warnings, cl.Closing())
	}
}

// A request that fails on a fresh connection, or whose context ended, is
// not retried: only a reused idle connection explains the loss.
func TestNoRetryOnFreshConnection(t *testing.T) {
	for _, kind := range []string{HTTPClientNetHTTP, HTTPClientLean} {
		t.Run(kind, func(t *testing.T) { testNoRetryOnFreshConnection(t, kind) })
	}
}

func testNoRetryOnFreshConnection(t *testing.T, kind string) {
	addr := loopbacktest.Serve(t, func(net.Conn) {}) // closes every connection at once
	cl, _ := Config{HTTPClient: kind}.NewClient(nil, nil)
	req, _ := cl.NewRequest(context.Background(), http.MethodPost, "http://"+addr+"/", strings.NewReader("x"))
	if _, n, err := cl.Do(req); err == nil || n != 0 {
		t.Errorf("fresh connection closed: retries %d, err %v", n, err)
	}
}

func TestContextKind(t *testing.T) {
	for _, tt := range []struct {
		kind loadgen.ErrorKind
		msg  string
		want loadgen.ErrorKind
	}{
		{loadgen.ErrClient, "HTTP 400: This model's maximum context length is 128 tokens. However, you requested 200 tokens", loadgen.ErrContextLength},
		{loadgen.ErrClient, "HTTP 400: request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it", loadgen.ErrContextLength},
		{loadgen.ErrStreamError, "error event in stream: Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096", loadgen.ErrContextLength},
		{loadgen.ErrClient, "HTTP 400: The decoder prompt (length 200) is longer than the maximum model length of 128.", loadgen.ErrContextLength},
		{loadgen.ErrClient, "HTTP 400: max_tokens too large", loadgen.ErrClient},
		// A server failing is not a refusal for length, whatever it says.
		{loadgen.ErrServer, "HTTP 500: maximum context length", loadgen.ErrServer},
	} {
		if got := ContextKind(tt.kind, tt.msg); got != tt.want {
			t.Errorf("ContextKind(%s, %q) = %s, want %s", tt.kind, tt.msg, got, tt.want)
		}
	}
}
