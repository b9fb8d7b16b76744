package protocol

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/ollama"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/tgi"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

func TestTable(t *testing.T) {
	for _, name := range Names() {
		c, err := New(Target{Endpoint: transport.Endpoint{URL: "http://127.0.0.1:1"}, API: name, Model: "m", Stream: true})
		if err != nil || c == nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(Target{Endpoint: transport.Endpoint{URL: "http://127.0.0.1:1"}, API: "triton-http"}); err == nil || !strings.Contains(err.Error(), "openai-chat") {
		t.Errorf("unknown api: %v", err)
	}
}

// TestOpen: one preflight for every protocol. A model the server lacks is
// refused in the server's words, marked ErrNotServed; a server that does
// not answer is refused without that mark; no model discovers the
// server's; an unknown --api is a ConfigError; llama.cpp's list (one
// model, by its file's path) passes any name.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	srv := simtest.Start(t, sim.Config{Model: "tiny", StrictModel: true, FixedTTFT: 1})
	for _, api := range []string{openai.APIChat, ollama.API, tgi.API} {
		base := srv.URL
		if api == openai.APIChat {
			base += "/v1"
		}
		t.Run(api, func(t *testing.T) {
			c, model, err := Open(ctx, Target{Endpoint: transport.Endpoint{URL: base}, API: api, Model: "tiny"})
			if err != nil || c == nil || model != "tiny" {
				t.Fatalf("Open tiny: %v, %q", err, model)
			}
			_, model, err = Open(ctx, Target{Endpoint: transport.Endpoint{URL: base}, API: api})
			if err != nil || model != "tiny" {
				t.Fatalf("Open with no model: %v, discovered %q", err, model)
			}
			_, _, err = Open(ctx, Target{Endpoint: transport.Endpoint{URL: base}, API: api, Model: "nope"})
			if !errors.Is(err, loadgen.ErrNotServed) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), `"tiny"`) {
				t.Errorf("Open nope: %v, want ErrNotServed naming both models", err)
			}
		})
	}
	_, _, err := Open(ctx, Target{Endpoint: transport.Endpoint{URL: "http://127.0.0.1:1/v1"}, API: openai.APIChat, Model: "tiny"})
	if err == nil || errors.Is(err, loadgen.ErrNotServed) || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("Open of a closed port: %v", err)
	}
	var ce *ConfigError
	if _, _, err := Open(ctx, Target{Endpoint: transport.Endpoint{URL: srv.URL}, API: "triton-http"}); !errors.As(err, &ce) {
		t.Errorf("unknown api: %v, want a ConfigError", err)
	}
	llama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"/tmp/x/tiny.gguf","object":"model","owned_by":"llamacpp"}]}`)
	}))
	defer llama.Close()
	if _, _, err := Open(ctx, Target{Endpoint: transport.Endpoint{URL: llama.URL + "/v1"}, API: openai.APIChat, Model: "tiny"}); err != nil {
		t.Errorf("llama.cpp (one model listed by path): %v", err)
	}
}

// TestOpenReadsTheKey: Open sends the key of APIKeyFile, else of
// $TAILGATE_API_KEY, else of $OPENAI_API_KEY, on its first request (model
// discovery); a key file it cannot use is a ConfigError that names the
// file and shows no key.
func TestOpenReadsTheKey(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lastAuth := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(auth) == 0 {
			return ""
		}
		return auth[len(auth)-1]
	}
	ctx := context.Background()
	t.Setenv(transport.EnvAPIKey, "sk-tailgate")
	t.Setenv(transport.EnvAPIKeyOpenAI, "sk-openai")
	for _, tc := range []struct {
		name, file, env, want string
	}{
		{"file first", file, "", "Bearer sk-file"},
		{"then TAILGATE_API_KEY", "", "", "Bearer sk-tailgate"},
		{"then OPENAI_API_KEY", "", "unset", "Bearer sk-openai"},
	} {
		if tc.env == "unset" {
			t.Setenv(transport.EnvAPIKey, "")
		}
		if _, _, err := Open(ctx, Target{Endpoint: transport.Endpoint{URL: srv.URL + "/v1"}, API: openai.APIChat, APIKeyFile: tc.file}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := lastAuth(); got != tc.want {
			t.Errorf("%s: the server got Authorization %q, want %q", tc.name, got, tc.want)
		}
	}

	two := filepath.Join(dir, "two")
	if err := os.WriteFile(two, []byte("sk-one\nsk-two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ce *ConfigError
	_, _, err := Open(ctx, Target{Endpoint: transport.Endpoint{URL: srv.URL + "/v1"}, API: openai.APIChat, APIKeyFile: two})
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), two) || strings.Contains(err.Error(), "sk-") {
		t.Errorf("two-line key file: %v; want a ConfigError naming the file, not its keys", err)
	}
}

// TestDescribeServer: what each server says about itself reaches
// environment.json's server block: vLLM's /version, llama.cpp's /props
// (build, slots, context), Ollama's /api/version and /api/show.
func TestDescribeServer(t *testing.T) {
	for _, tc := range []struct {
		profile, api string
		slots, ctx   int
		details      bool
	}{
		{"", openai.APIChat, 0, 0, false},
		{sim.ProfileLlamaCpp, openai.APIChat, 4, 4096, false},
		{sim.ProfileOllama, ollama.API, 0, 4096, true},
	} {
		t.Run(tc.api+"/"+tc.profile, func(t *testing.T) {
			srv := simtest.Start(t, sim.Config{Model: "tiny", Profile: tc.profile, Slots: 4, KVTokens: 4096, FixedTTFT: 1})
			url := srv.URL
			if tc.api == openai.APIChat {
				url += "/v1"
			}
			c, _, err := Open(context.Background(), Target{Endpoint: transport.Endpoint{URL: url}, API: tc.api, Model: "tiny"})
			if err != nil {
				t.Fatal(err)
			}
			info := c.DescribeServer(context.Background())
			if info.Version != "tailgate-sim-"+sim.Version || info.Slots != tc.slots || info.ContextLength != tc.ctx ||
				(info.ModelDetails["family"] == "llama") != tc.details {
				t.Errorf("%+v", info)
			}
		})
	}
}
