package kserve_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"

	"github.com/tailgate-llm/tailgate/sim/simtest"
)

func newGenerate(t *testing.T, target, model string, stream bool, headers ...string) *kserve.GenerateClient {
	t.Helper()
	c, err := kserve.NewGenerate(kserve.Config{Endpoint: transport.Endpoint{URL: target, Transport: transport.Config{Headers: headers}}, Model: model, Stream: kserve.Bool(stream), MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func doGenerate(t *testing.T, c loadgen.Client, seq int64) *loadgen.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec := loadgen.NewRecord(time.Now())
	rec.Seq = seq
	c.Do(ctx, &prompts.Prompt{Text: "hello there"}, rec)
	rec.Finalize()
	return rec
}

// Captured and constructed generate_stream bodies (Triton's generate
// extension as its servers send it, and a TensorRT-LLM event with its
// extra keys), served as they are.
func TestGenerateVectors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		kind       loadgen.ErrorKind
		chunks     int
		msg        string
		model      string // the model_name the server sent
	}{
		{"G4 TRT-LLM ensemble stream", `data: {"model_name":"ensemble","model_version":"1","sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":" Machine"}

data: {"model_name":"ensemble","model_version":"1","sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":" learning"}

data: {"model_name":"ensemble","model_version":"1","sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":" is"}

`, loadgen.ErrNone, 3, "", "ensemble"},
		{"G3 error after a response, HTTP 200", `data: {"model_name":"mock_llm","model_version":"1","TEXT":"hello world"}

data: {"error":"An Error Occurred"}

`, loadgen.ErrStreamError, 0, "An Error Occurred", "mock_llm"},
		{"vLLM with counts", "data: {\"text_output\":\"a\",\"num_output_tokens\":[2]}\r\n\r\ndata: {\"text_output\":[\"b\",\"c\"],\"num_output_tokens\":1}\n\n", loadgen.ErrNone, 2, "", ""},
		{"cut inside an event", "data: {\"text_output\":\"a\"}\n\ndata: {\"text_out", loadgen.ErrStreamTruncated, 1, "inside an event", ""},
		{"not JSON", "data: {\"text_output\":\n\n", loadgen.ErrProtocol, 0, "bad JSON", ""},
		{"empty", "", loadgen.ErrStreamTruncated, 0, "without any response", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			rec := doGenerate(t, newGenerate(t, srv.URL, "m", true), 1)
			if rec.ErrorKind != tc.kind || len(rec.Chunks) != tc.chunks || !strings.Contains(rec.Error, tc.msg) {
				t.Errorf("%s %q, %d chunks", rec.ErrorKind, rec.Error, len(rec.Chunks))
			}
			if rec.ResponseModel != tc.model {
				t.Errorf("response model %q, want %q", rec.ResponseModel, tc.model)
			}
			if tc.name == "vLLM with counts" && (rec.OutputTokens != 3 || rec.Chunks[0].Tokens != 2 || rec.Text != "") {
				t.Errorf("tokens %d, chunks %+v", rec.OutputTokens, rec.Chunks)
			}
		})
	}
}

// Against the simulator's generate extension: streamed and not, faults,
// and the preflight over the HTTP endpoints.
func TestGenerateAgainstSimulator(t *testing.T) {
	srv := simtest.Start(t, fixed())
	model := srv.Config().Model
	c := newGenerate(t, srv.URL, model, true)
	if err := c.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := doGenerate(t, c, 3)
	if !rec.OK() || len(rec.Chunks) != 8 || rec.OutputTokens != 8 || rec.InputTokens != 2 || rec.ChunkTokenSource != "server" {
		t.Fatalf("stream: %+v", rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.WaitIdle(ctx)
	if tr := srv.Truth(); len(tr) != 1 || tr[0].ID != "3" || len(tr[0].Chunks) != 8 || tr[0].Path != "/v2/models/"+model+"/generate_stream" {
		t.Fatalf("truth %+v", tr)
	}
	u := newGenerate(t, srv.URL, model, false)
	if err := u.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec := doGenerate(t, u, 4); !rec.OK() || !rec.Unstreamed || rec.OutputTokens != 8 || len(rec.Chunks) != 1 {
		t.Fatalf("unary: %+v", rec)
	}
	for fault, want := range map[string]loadgen.ErrorKind{"http_429": loadgen.ErrRateLimited, "http_503": loadgen.ErrServer,
		"error_in_stream": loadgen.ErrStreamError, "truncate": loadgen.ErrStreamTruncated, "malformed": loadgen.ErrProtocol} {
		f := newGenerate(t, srv.URL, model, true, "X-Sim-Fault: "+fault)
		if err := f.Preflight(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rec := doGenerate(t, f, 5); rec.ErrorKind != want {
			t.Errorf("%s: %s %q", fault, rec.ErrorKind, rec.Error)
		}
	}
	m := newGenerate(t, srv.URL, "llama-70b", true)
	if err := m.Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), `model "llama-70b" is not ready`) ||
		!strings.Contains(err.Error(), "unknown model") {
		t.Errorf("missing model: %v", err)
	}
	if name, err := m.DiscoverModel(context.Background()); err != nil || name != model {
		t.Errorf("discover: %q %v", name, err)
	}
	if info := c.DescribeServer(context.Background()); info.Headers["server"] != "tailgate-sim" {
		t.Errorf("describe %+v", info)
	}
}
