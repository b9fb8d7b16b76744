package openai

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// modelServer lists two models at /v1/models to requests that carry the
// bearer key and the tenant header, with version headers beside.
func modelServer(t *testing.T, tls bool) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sk-SECRET-key" || r.Header.Get("X-Tenant") != "a" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"no such key"}}`))
			return
		}
		w.Header().Set("Server", "sim/0.1")
		w.Header().Set("X-Vllm-Version", "0.9.0")
		w.Header().Set("X-Other", "no")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"sim-qwen"},{"id":"sim-llama"}]}`))
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

var modelAuth = transport.Config{APIKey: "sk-SECRET-key", Headers: []string{"X-Tenant: a"}}

// The server block comes through the run's own transport: CA file and
// headers apply (evidence.ProbeServer used a bare client that had neither).
func TestDescribeServer(t *testing.T) {
	srv := modelServer(t, true)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tc := modelAuth
	tc.CAFile = caFile
	base := strings.Replace(srv.URL, "https://", "https://user:SECRET@", 1) + "/v1?api_key=SECRET"
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: base, Transport: tc}})
	info := c.DescribeServer(context.Background())
	if info.Error != "" || !reflect.DeepEqual(info.Models, []string{"sim-llama", "sim-qwen"}) ||
		info.Headers["server"] != "sim/0.1" || info.Headers["x-vllm-version"] != "0.9.0" || len(info.Headers) != 2 {
		t.Fatalf("%+v", info)
	}
	if want := srv.URL + "/v1/chat/completions?[REDACTED]"; info.URL != want {
		t.Errorf("URL %q, want %q", info.URL, want)
	}

	// Without the credentials: the failure is recorded, not returned.
	info = newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{CAFile: caFile}}}).DescribeServer(context.Background())
	if !strings.Contains(info.Error, "HTTP 401: no such key") {
		t.Errorf("Error %q", info.Error)
	}
}

func TestPreflight(t *testing.T) {
	srv := modelServer(t, false)
	for _, tt := range []struct {
		name, model string
		cfg         transport.Config
		want        string // "" = passes
	}{
		{"listed", "sim-qwen", modelAuth, ""},
		{"no model named", "", modelAuth, ""},
		{"not listed", "llama-3", modelAuth, `does not serve model "llama-3": it lists "sim-llama", "sim-qwen"`},
		{"credentials refused", "sim-qwen", transport.Config{}, "refuses the credentials"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: tt.cfg}, Model: tt.model})
			err := c.Preflight(context.Background())
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Preflight: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), srv.URL)):
				t.Fatalf("Preflight = %v, want an error naming %s and containing %q", err, srv.URL, tt.want)
			}
		})
	}
	t.Run("no model list", func(t *testing.T) {
		bare := httptest.NewServer(http.NotFoundHandler())
		defer bare.Close()
		if err := newClient(t, Config{Endpoint: transport.Endpoint{URL: bare.URL}, Model: "m"}).Preflight(context.Background()); err != nil {
			t.Fatalf("a server without /v1/models: %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		start := time.Now()
		err := newClient(t, Config{Endpoint: transport.Endpoint{URL: "http://" + closedAddr(t)}, Model: "m"}).Preflight(context.Background())
		if err == nil || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("Preflight = %v", err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("took %v", el)
		}
	})
	t.Run("silent", func(t *testing.T) {
		// Accepts connections and never answers: bounded by the caller's
		// context here, by PreflightTimeout otherwise.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = newClient(t, Config{Endpoint: transport.Endpoint{URL: "http://" + ln.Addr().String()}}).Preflight(ctx)
		if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
			t.Fatalf("Preflight = %v", err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("took %v", el)
		}
	})
}

func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Issue 13 item 17: a URL's password and query, the API key and secret
// headers never appear in any error, whichever call made it.
func TestNoCredentialInErrors(t *testing.T) {
	tc := transport.Config{APIKey: "sk-SECRET-key", Headers: []string{"X-Api-Key: SECRET-header-1"}}
	for _, base := range []string{
		"http://user:SECRET@" + closedAddr(t) + "/v1?key=SECRET",
		"http://user:SECRET@" + modelServer(t, false).Listener.Addr().String() + "/v1?key=SECRET", // answers 401
	} {
		c := newClient(t, Config{Endpoint: transport.Endpoint{URL: base, Transport: tc}, Model: "m"})
		_, derr := c.DiscoverModel(context.Background())
		perr := c.Preflight(context.Background())
		info := c.DescribeServer(context.Background())
		rec := do(t, c, testPrompt)
		for what, msg := range map[string]string{"DiscoverModel": errString(derr), "Preflight": errString(perr),
			"DescribeServer": info.Error, "Do": rec.Error, "URL": c.URL()} {
			if what != "URL" && msg == "" {
				t.Errorf("%s: no error against %s", what, base)
			}
			if strings.Contains(msg, "SECRET") {
				t.Errorf("%s shows a credential: %q", what, msg)
			}
		}
	}
	if _, err := New(Config{Endpoint: transport.Endpoint{URL: "http://user:SECRET@h:port/", Transport: tc}}); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("New with a bad port: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The mix's models are checked against the server's list before the load:
// all listed passes; any missing is refused, naming each one missing and
// every model the server lists.
func TestCheckModels(t *testing.T) {
	srv := modelServer(t, false)
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: modelAuth}, Model: "sim-qwen"})
	if err := c.CheckModels(context.Background(), []string{"sim-llama", "sim-qwen"}); err != nil {
		t.Fatalf("both listed: %v", err)
	}
	err := c.CheckModels(context.Background(), []string{"lora-c", "sim-llama", "lora-d"})
	want := `does not serve "lora-c", "lora-d" that the mix names: it lists "sim-llama", "sim-qwen"`
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, loadgen.ErrNotServed) {
		t.Fatalf("CheckModels = %v, want ErrNotServed with %q", err, want)
	}
}

// A preflight that runs out of time keeps context.DeadlineExceeded in its
// chain (a caller tells a slow target from a refusing one by errors.Is),
// and its words carry no credential of the target URL or the headers.
func TestPreflightTimeoutUnwraps(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	u := strings.Replace(srv.URL, "http://", "http://user:SECRET-pass@", 1) + "/?key=SECRET-query"
	c, err := New(Config{Endpoint: transport.Endpoint{URL: u, Transport: modelAuth}, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = c.Preflight(ctx)
	if err == nil {
		t.Fatal("a target that never answers passed the preflight")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("a credential in %q", err)
	}
}
