package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestErrorWords reads each server's real error body the way it sends it.
func TestErrorWords(t *testing.T) {
	long := strings.Repeat("x", MaxErrorMessage+50)
	for _, c := range []struct{ name, body, want string }{
		{"openai", `{"error":{"message":"The model ` + "`gpt-5`" + ` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			"The model `gpt-5` does not exist (code model_not_found)"},
		{"vllm object error", `{"object":"error","message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`,
			"The model `x` does not exist. (code 404)"},
		{"vllm nested", `{"error":{"message":"max_tokens must be at least 1, got 0.","type":"BadRequestError","param":null,"code":400}}`,
			"max_tokens must be at least 1, got 0. (code 400)"},
		{"llama.cpp", `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`,
			"the request exceeds the available context size, try increasing it (code 400)"},
		{"tgi", `{"error":"Input validation error: ` + "`inputs`" + ` must have less than 4096 tokens. Given: 5000","error_type":"validation"}`,
			"Input validation error: `inputs` must have less than 4096 tokens. Given: 5000 (validation)"},
		{"tgi overloaded", `{"error":"Model is overloaded","error_type":"overloaded"}`, "Model is overloaded (overloaded)"},
		{"ollama", `{"error":"model \"llama3\" not found, try pulling it first"}`, `model "llama3" not found, try pulling it first`},
		{"triton generate", `{"error":"Request for unknown model: 'llama' is not found"}`, "Request for unknown model: 'llama' is not found"},
		{"fastapi string", `{"detail":"Not Found"}`, "Not Found"},
		{"fastapi list", `{"detail":[{"loc":["body"],"msg":"field required"}]}`, `[{"loc":["body"],"msg":"field required"}]`},
		{"plain text", "502 Bad Gateway\n<html></html>", "502 Bad Gateway"},
		{"other JSON", `{"foo":1}`, `"{\"foo\":1}"`},
		{"empty", "  \n", ""},
		{"long", `{"error":"` + long + `"}`, long[:MaxErrorMessage] + "..."},
	} {
		if got := ErrorWords([]byte(c.body)); got != c.want {
			t.Errorf("%s: ErrorWords = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRootGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"model_id":"tiny"}`))
		case "/locked":
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"bad token"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no route"}`))
		}
	}))
	defer srv.Close()
	// No proxy from the environment: http.ProxyFromEnvironment reads it
	// once per process, and TestTransportConfig sets it later.
	direct := Config{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }}
	r, err := RootConfig{Endpoint: Endpoint{URL: srv.URL, Transport: direct}}.Open("base URL")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if b, err := r.Get(ctx, "/ok", MaxErrorBody); err != nil || string(b) != `{"model_id":"tiny"}` {
		t.Errorf("Get /ok: %q, %v", b, err)
	}
	_, err = r.Get(ctx, "/info", MaxErrorBody)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusNotFound || se.Words != "no route" || se.Refused() ||
		err.Error() != "target "+srv.URL+": GET /info: HTTP 404: no route" {
		t.Errorf("Get /info: %v, want a StatusError 404 naming the target, the request and the words", err)
	}
	_, err = r.Get(ctx, "/locked", MaxErrorBody)
	if !errors.As(err, &se) || !se.Refused() || !strings.Contains(err.Error(), "refuses the credentials") || !strings.Contains(err.Error(), "bad token") {
		t.Errorf("Get /locked: %v, want a refusal of the credentials", err)
	}
	dead, err := RootConfig{Endpoint: Endpoint{URL: "http://127.0.0.1:1", Transport: direct}}.Open("base URL")
	if err != nil {
		t.Fatal(err)
	}
	_, err = dead.Get(ctx, "/api/tags", MaxErrorBody)
	var un *Unanswered
	if !errors.As(err, &un) || errors.As(err, &se) || !strings.HasPrefix(err.Error(), "target http://127.0.0.1:1 does not answer GET /api/tags: ") ||
		!strings.Contains(err.Error(), "refused") {
		t.Errorf("Get of a closed port: %v, want Unanswered naming the target and the request", err)
	}
	d := error(&Undiscovered{Target: dead.SafeBase, Err: err})
	if !errors.As(d, &un) || !strings.HasPrefix(d.Error(), "discovering the model: target http://127.0.0.1:1 does not answer") {
		t.Errorf("Undiscovered over Unanswered: %v", d)
	}
	if d := (&Undiscovered{Target: "http://h", Why: "GET /info names no model_id"}).Error(); d != "discovering the model at http://h: GET /info names no model_id" {
		t.Errorf("Undiscovered: %q", d)
	}
}
