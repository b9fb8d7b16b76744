package transport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// newOutgoing builds the very request Send builds through NewRequest:
// same method, URL, Host, headers (the API key's Authorization among
// them), length and body, on the wire byte for byte; the client's shared
// headers are never written to.
func TestOutgoingMatchesNewRequest(t *testing.T) {
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	cfg := Config{APIKey: "sk-SECRET", Proxy: noProxy, HTTPClient: HTTPClientLean,
		Headers: []string{"X-Team: a", "X-Team: b", "Host: front.example"}}
	cl, err := cfg.NewClient(JSONHeaders("application/json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := cl.shared.Clone()
	posts := []Post{
		{URL: "http://127.0.0.1:1/v1/chat/completions", Body: []byte(`{"a":1}`)},
		{URL: "http://127.0.0.1:1/v1/chat/completions", Body: []byte(`{}`), ID: "p1", Accept: "text/event-stream"},
		{URL: "http://127.0.0.1:1/v1/completions?x=1", Header: map[string]string{"Authorization": "Bearer other", "x-tenant": "t"}},
		{URL: "http://user:pw@127.0.0.1:1/v1/completions", Body: []byte("x"), Header: map[string]string{"X-Team": "c"}},
	}
	for i, p := range posts {
		got, o := cl.newOutgoing(context.Background(), p, int64(100+i))
		if o == nil {
			t.Fatalf("post %d: not built", i)
		}
		want, err := cl.NewRequest(context.Background(), http.MethodPost, p.URL, bytes.NewReader(p.Body))
		if err != nil {
			t.Fatal(err)
		}
		id := p.ID
		if id == "" {
			id = "10" + string(rune('0'+i))
		}
		want.Header.Set("X-Request-Id", id)
		if p.Accept != "" {
			want.Header.Set("Accept", p.Accept)
		}
		for k, v := range p.Header {
			want.Header.Set(k, v)
		}
		if got.Method != want.Method || got.URL.String() != want.URL.String() || got.Host != want.Host ||
			got.Proto != want.Proto || got.ContentLength != want.ContentLength || !reflect.DeepEqual(got.Header, want.Header) ||
			(got.Body == http.NoBody) != (want.Body == http.NoBody) {
			t.Errorf("post %d:\n got %s %s host %q len %d %v\nwant %s %s host %q len %d %v", i,
				got.Method, got.URL, got.Host, got.ContentLength, got.Header, want.Method, want.URL, want.Host, want.ContentLength, want.Header)
		}
		if g, w := wire(t, got), wire(t, want); g != w {
			t.Errorf("post %d on the wire:\n got %q\nwant %q", i, g, w)
		}
		if again, err := got.GetBody(); err != nil {
			t.Fatal(err)
		} else if b, _ := io.ReadAll(again); !bytes.Equal(b, p.Body) {
			t.Errorf("post %d: GetBody %q, want %q", i, b, p.Body)
		}
		o.put()
	}
	if !reflect.DeepEqual(cl.shared, before) {
		t.Errorf("shared headers changed: %v, were %v", cl.shared, before)
	}

	// Only where the lean client sends it itself.
	nh, _ := Config{Proxy: noProxy, HTTPClient: HTTPClientNetHTTP}.NewClient(nil, nil)
	pu, _ := url.Parse("http://127.0.0.1:9")
	viaProxy, _ := Config{HTTPClient: HTTPClientLean, Proxy: func(*http.Request) (*url.URL, error) { return pu, nil }}.NewClient(nil, nil)
	for name, c := range map[string]*Client{"nethttp": nh, "proxy": viaProxy, "bad URL": cl} {
		u := "http://127.0.0.1:1/x"
		if name == "bad URL" {
			u = "http://[::1"
		}
		if req, o := c.newOutgoing(context.Background(), Post{URL: u}, 1); req != nil || o != nil {
			t.Errorf("%s: built", name)
		}
	}
}

// wire is req as the lean client writes it, header lines sorted (a map's
// order is not the request's).
func wire(t *testing.T, req *http.Request) string {
	t.Helper()
	b, err := appendRequest(nil, req, false)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(b), "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	slices.Sort(lines[1:])
	return strings.Join(lines, "\r\n") + "\r\n\r\n" + body
}

// A pooled request keeps nothing of the one before it: a prompt's header
// goes with its request only, and every request carries the API key.
func TestOutgoingReuse(t *testing.T) {
	seen := make(chan http.Header, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	cl, err := Config{APIKey: "sk-SECRET", Proxy: noProxy, HTTPClient: HTTPClientLean}.NewClient(JSONHeaders(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	for i, p := range []Post{
		{URL: srv.URL, Body: []byte("{}"), Accept: "text/event-stream", Header: map[string]string{"X-Tenant": "a"}},
		{URL: srv.URL, Body: []byte("{}")},
		{URL: srv.URL + "/other", ID: "z"},
	} {
		rec := loadgen.NewRecord(time.Now())
		rec.Seq = int64(i)
		resp := cl.Send(context.Background(), rec, p)
		if resp == nil {
			t.Fatalf("request %d: %s %s", i, rec.ErrorKind, rec.Error)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		h := <-seen
		want := []string{"0 text/event-stream a", "1  ", "z  "}[i] // JSONHeaders("") sets no Accept
		if got := h.Get("X-Request-Id") + " " + h.Get("Accept") + " " + h.Get("X-Tenant"); got != want {
			t.Errorf("request %d: %q, want %q", i, got, want)
		}
		if h.Get("Authorization") != "Bearer sk-SECRET" {
			t.Errorf("request %d: Authorization %q", i, h.Get("Authorization"))
		}
	}
}

// The answers to requests for one URL share what they keep of the
// request (method, URL, host), and it says what was sent.
func TestLeanAnswerRequestShared(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	cl, err := Config{Proxy: noProxy, HTTPClient: HTTPClientLean}.NewClient(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	var got []*http.Request
	for _, u := range []string{srv.URL + "/a", srv.URL + "/a", srv.URL + "/b"} {
		rec := loadgen.NewRecord(time.Now())
		resp := cl.Send(context.Background(), rec, Post{URL: u, Body: []byte("{}")})
		if resp == nil {
			t.Fatalf("%s: %s", u, rec.Error)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if r := resp.Request; r.Method != http.MethodPost || r.URL.String() != u || r.Host != strings.TrimPrefix(srv.URL, "http://") || r.Header != nil || r.Body != nil {
			t.Errorf("%s: the answer's request %s %s host %q, header %v", u, r.Method, r.URL, r.Host, r.Header)
		}
		got = append(got, resp.Request)
	}
	if got[0] != got[1] || got[1] == got[2] {
		t.Errorf("shared: /a and /a %v, /a and /b %v; want true, false", got[0] == got[1], got[1] == got[2])
	}
}

// A pooled request with a body costs no allocation: the request (WithContext's
// copy), its header map, body reader and GetBody come with the pooled
// outgoing.
func TestOutgoingAllocs(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops at random under the race detector")
	}
	cl, err := Config{HTTPClient: HTTPClientLean, Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }}.NewClient(JSONHeaders("application/json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := Post{URL: "http://127.0.0.1:1/v1/chat/completions", Body: []byte(`{"a":1}`), ID: "r1"}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		req, o := cl.newOutgoing(ctx, p, 1)
		if o == nil || req.GetBody == nil {
			t.Fatal("not built")
		}
		o.put()
	})
	if allocs > 0 {
		t.Errorf("%.0f allocations, want none", allocs)
	}
}
