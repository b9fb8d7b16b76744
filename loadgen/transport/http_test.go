package transport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

func TestParseRoot(t *testing.T) {
	u, err := ParseRoot(" http://u:pw@h:1/prefix/?q=1#f ", "base URL")
	if err != nil || u.String() != "http://u:pw@h:1/prefix" {
		t.Errorf("ParseRoot = %v, %v", u, err)
	}
	for _, bad := range []string{"h:1", "ftp://h", "http://", "http://u:SECRET@h:1/%zz"} {
		_, err := ParseRoot(bad, "base URL")
		if err == nil || !strings.Contains(err.Error(), "base URL") || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("ParseRoot(%q): %v", bad, err)
		}
	}
}

func TestStatusTextTruncate(t *testing.T) {
	if got := StatusText(503, ""); got != "HTTP 503" {
		t.Errorf("StatusText = %q", got)
	}
	if got := StatusText(429, "slow down"); got != "HTTP 429: slow down" {
		t.Errorf("StatusText = %q", got)
	}
	if got := Truncate("héllo", 2); got != "h..." {
		t.Errorf("Truncate cut a rune: %q", got)
	}
}

func TestReadWhole(t *testing.T) {
	b, kind, _ := ReadWhole(context.Background(), strings.NewReader("12345"), 5)
	if string(b) != "12345" || kind != loadgen.ErrNone {
		t.Errorf("ReadWhole = %q %q", b, kind)
	}
	if _, kind, msg := ReadWhole(context.Background(), strings.NewReader("123456"), 5); kind != loadgen.ErrProtocol || !strings.Contains(msg, "over 5 bytes") {
		t.Errorf("over the limit: %q %q", kind, msg)
	}
	if _, kind, _ := ReadWhole(context.Background(), io.MultiReader(strings.NewReader("1"), errReader{}), 5); kind != loadgen.ErrStreamTruncated {
		t.Errorf("lost connection: %q", kind)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestSend(t *testing.T) {
	for _, kind := range []string{HTTPClientNetHTTP, HTTPClientLean} {
		t.Run(kind, func(t *testing.T) { testSend(t, kind) })
	}
}

func testSend(t *testing.T, kind string) {
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids = append(ids, r.Header.Get("X-Request-Id")+" "+r.Header.Get("Accept"))
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"busy sk-SECRET"}`)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	// A proxy of its own: the environment's is read once per process, and
	// TestTransportConfig sets it.
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	cl, err := Config{APIKey: "sk-SECRET", Proxy: noProxy, HTTPClient: kind}.NewClient(JSONHeaders(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	words := func(b []byte) string { return strings.TrimPrefix(strings.TrimSuffix(string(b), `"}`), `{"error":"`) }

	rec := loadgen.NewRecord(time.Now())
	rec.Seq = 7
	resp := cl.Send(context.Background(), rec, Post{URL: srv.URL + "/ok", Body: []byte("{}"), Accept: "text/event-stream", ErrorWords: words})
	if resp == nil || rec.Status != 200 || rec.ErrorKind != loadgen.ErrNone || rec.Sent <= 0 {
		t.Fatalf("ok: %v %+v", resp, rec)
	}
	resp.Body.Close()

	rec = loadgen.NewRecord(time.Now())
	if resp := cl.Send(context.Background(), rec, Post{URL: srv.URL + "/busy", ID: "p1", ErrorWords: words}); resp != nil {
		t.Fatal("503 returned a response")
	}
	if rec.Status != 503 || rec.ErrorKind != loadgen.ErrServer || !strings.HasPrefix(rec.Error, "HTTP 503: busy ") || strings.Contains(rec.Error, "SECRET") || rec.End < rec.Sent {
		t.Errorf("503: %+v", rec)
	}
	if got := strings.Join(ids, ","); got != "7 text/event-stream,p1 " {
		t.Errorf("X-Request-Id and Accept: %q", got)
	}

	rec = loadgen.NewRecord(time.Now())
	if resp := cl.Send(context.Background(), rec, Post{URL: "http://[::1"}); resp != nil || rec.ErrorKind != loadgen.ErrProtocol || !strings.HasPrefix(rec.Error, "building the request: ") {
		t.Errorf("bad URL: %+v", rec)
	}
}

// SendOwn gives the body back only for an answer the lean client read on
// its own connection to the request itself: not net/http's, not a
// redirect's (the body re-sent through GetBody, perhaps through net/http).
func TestSendOwn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer srv.Close()
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	for _, c := range []struct {
		kind, path string
		own        bool
	}{
		{HTTPClientLean, "/ok", true},
		{HTTPClientLean, "/moved", false},
		{HTTPClientNetHTTP, "/ok", false},
		{HTTPClientNetHTTP, "/moved", false},
	} {
		cl, err := Config{Proxy: noProxy, HTTPClient: c.kind}.NewClient(JSONHeaders(""), nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := loadgen.NewRecord(time.Now())
		resp, own := cl.SendOwn(context.Background(), rec, Post{URL: srv.URL + c.path, Body: []byte(`{"a":1}`)})
		if resp == nil {
			t.Fatalf("%s %s: %+v", c.kind, c.path, rec)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != `{"a":1}` || own != c.own {
			t.Errorf("%s %s: body %q, own %v; want the body sent, own %v", c.kind, c.path, b, own, c.own)
		}
		cl.CloseIdleConnections()
	}
}
