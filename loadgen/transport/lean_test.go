package transport

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/pipenet"
	"github.com/tailgate-llm/tailgate/internal/version"
)

func TestHTTPClientChoice(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		lean bool
	}{
		{Config{}, false},
		{Config{HTTPClient: HTTPClientNetHTTP}, false},
		{Config{HTTPClient: HTTPClientAuto}, true},
		{Config{HTTPClient: HTTPClientLean}, true},
		{Config{HTTPClient: HTTPClientAuto, CertFile: "c.pem", KeyFile: "k.pem"}, false},
		{Config{HTTPClient: HTTPClientAuto, MaxConnsPerHost: 4}, false},
	} {
		useLean, err := tc.cfg.useLean()
		if err != nil || useLean != tc.lean {
			t.Errorf("%+v: lean %v, %v; want %v", tc.cfg, useLean, err, tc.lean)
		}
	}
	cl, err := Config{HTTPClient: HTTPClientAuto}.NewClient(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cl.pooled.Transport.(*lean); !ok {
		t.Errorf("auto: pooled transport %T, want the lean client", cl.pooled.Transport)
	}
	if _, err := (Config{HTTPClient: "fast"}).NewClient(nil, nil); err == nil || !strings.Contains(err.Error(), `"fast"`) {
		t.Errorf("unknown client: %v", err)
	}
}

// A request through a proxy goes to net/http, which speaks to proxies;
// one without goes on the lean client's own connections.
func TestLeanProxyFallback(t *testing.T) {
	var direct, proxied atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		direct.Add(1)
		io.WriteString(w, "direct")
	}))
	defer target.Close()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		io.WriteString(w, "proxied "+r.URL.String())
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	useProxy := false
	cl, err := Config{HTTPClient: HTTPClientLean, Proxy: func(*http.Request) (*url.URL, error) {
		if useProxy {
			return pu, nil
		}
		return nil, nil
	}}.NewClient(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	get := func() string {
		req, _ := cl.NewRequest(context.Background(), http.MethodGet, target.URL+"/x?q=1", nil)
		resp, _, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get(); got != "direct" {
		t.Errorf("without a proxy: %q", got)
	}
	useProxy = true
	if got := get(); !strings.HasPrefix(got, "proxied http://") || !strings.HasSuffix(got, "/x?q=1") {
		t.Errorf("with a proxy: %q", got)
	}
	if direct.Load() != 1 || proxied.Load() != 1 {
		t.Errorf("direct %d, proxied %d", direct.Load(), proxied.Load())
	}
}

// Kept-alive connections are reused across requests of every framing, and
// the request arrives as net/http would send it.
// countConns starts srv and counts the connections it accepts.
func countConns(srv *httptest.Server) *atomic.Int32 {
	var n atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	return &n
}

func TestLeanKeepAlive(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Request-Id") != "9" || r.Header.Get("User-Agent") != version.UserAgent() || string(b) != `{"n":1}` || r.ContentLength != 7 {
			w.WriteHeader(400)
			return
		}
		switch r.URL.Query().Get("f") {
		case "chunked":
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
			w.Write([]byte("b"))
		case "empty":
			w.WriteHeader(204)
		default:
			w.Header().Set("Content-Length", "2")
			w.Write([]byte("ab"))
		}
	}))
	conns := countConns(srv)
	defer srv.Close()
	// Not the environment's proxy: ProxyFromEnvironment reads it once per
	// process, and TestTransportConfig sets it later.
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	cl, err := Config{HTTPClient: HTTPClientLean, Proxy: noProxy}.NewClient(JSONHeaders(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	for i, f := range []string{"chunked", "length", "empty", "chunked", "length"} {
		req, _ := cl.NewRequest(context.Background(), http.MethodPost, srv.URL+"/?f="+f, strings.NewReader(`{"n":1}`))
		req.Header.Set("X-Request-Id", "9")
		resp, retries, err := cl.Do(req)
		if err != nil || retries != 0 {
			t.Fatalf("request %d (%s): %v, retries %d", i, f, err, retries)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := "ab"
		if f == "empty" {
			want = ""
		}
		if string(b) != want || resp.StatusCode/100 != 2 {
			t.Errorf("request %d (%s): %d %q", i, f, resp.StatusCode, b)
		}
	}
	if conns.Load() != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1", conns.Load())
	}
}

// Under HoldConnections each request's connection, its answer read, is
// kept aside, so the next request opens one of its own (chunked, length
// and bodiless answers alike); Release pools them all, and later requests
// reuse them.
func TestLeanHoldConnections(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("f") == "empty" {
			w.WriteHeader(204)
			return
		}
		w.Write([]byte("ab"))
	}))
	conns := countConns(srv)
	defer srv.Close()
	cl := leanClient(t)
	get := func(ctx context.Context, f string) {
		t.Helper()
		resp, err := cl.SideRequest(ctx, http.MethodGet, srv.URL+"/?f="+f, "")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	hctx, held := HoldConnections(context.Background())
	for _, f := range []string{"", "empty", ""} {
		get(hctx, f)
	}
	if conns.Load() != 3 || held.Len() != 3 {
		t.Fatalf("3 requests held: %d connections, %d held, want 3 and 3", conns.Load(), held.Len())
	}
	held.Release()
	for range 3 {
		get(context.Background(), "")
	}
	if conns.Load() != 3 || held.Len() != 0 {
		t.Errorf("after Release: %d connections, %d held, want 3 (reused) and 0", conns.Load(), held.Len())
	}
}

// Config.Dial opens both paths' connections: net/http's and the lean
// client's reach a server that is only on in-memory pipes.
func TestDialReachesPipeServer(t *testing.T) {
	for _, hc := range []string{HTTPClientNetHTTP, HTTPClientLean} {
		ln := pipenet.Listen()
		dials := 0
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "piped") })}
		go srv.Serve(ln)
		noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
		cl, err := Config{HTTPClient: hc, Proxy: noProxy, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials++
			return ln.Dial(ctx, network, addr)
		}}.NewClient(JSONHeaders(""), nil)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := cl.NewRequest(context.Background(), http.MethodPost, "http://nowhere.invalid/x", strings.NewReader(`{}`))
		resp, _, err := cl.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", hc, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "piped" || dials != 1 {
			t.Errorf("%s: body %q after %d dials, want piped after 1", hc, b, dials)
		}
		cl.CloseIdleConnections()
		srv.Close()
	}
}
