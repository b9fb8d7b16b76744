package kserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/loadgen"
	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/loadgen/sse"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// APIGenerate is the --api name of Triton's generate extension over HTTP.
const APIGenerate = "triton-generate"

// maxGenerateBody bounds a non-streamed answer.
const maxGenerateBody = 64 << 20

// GenerateClient speaks Triton's generate extension: POST
// /v2/models/{model}/generate_stream (Server-Sent Events, one response per
// event, no [DONE]: the stream ends with the body) or /generate (one JSON
// answer), with the KServe v2 HTTP health and metadata endpoints for the
// preflight. The body is {"text_input": …, "parameters": {…}, …}: other
// keys fill the model's input tensors of those names, as Triton maps them.
// It implements the same interfaces as Client and is safe for concurrent
// use.
type GenerateClient struct {
	root    transport.Root
	model   string
	version string
	tensors Tensors
	spec    atomic.Pointer[modelSpec]
}

var (
	_ loadgen.Client          = (*GenerateClient)(nil)
	_ loadgen.ModelDiscoverer = (*GenerateClient)(nil)
	_ loadgen.Preflighter     = (*GenerateClient)(nil)
	_ loadgen.ServerDescriber = (*GenerateClient)(nil)
)

// NewGenerate returns a generate-extension client for cfg; cfg.URL is
// the server's HTTP root (http://triton:8000). Connections, Keepalive and
// the gRPC-only settings do not apply.
func NewGenerate(cfg Config) (*GenerateClient, error) {
	root, err := transport.RootConfig{Endpoint: cfg.Endpoint, Stream: cfg.Stream, MaxTokens: cfg.MaxTokens}.Open("generate target")
	if err != nil {
		return nil, fmt.Errorf("kserve: %w", err)
	}
	switch cfg.Tensors {
	case TensorsAuto, TensorsVLLM, TensorsTRTLLM:
	default:
		return nil, fmt.Errorf("kserve: tensors %q: want %q or %q", cfg.Tensors, TensorsVLLM, TensorsTRTLLM)
	}
	c := &GenerateClient{root: root, model: cfg.Model, version: cfg.Version, tensors: cfg.Tensors}
	c.spec.Store(defaultSpec(cfg.Tensors))
	return c, nil
}

// modelPath is /v2/models/{model}[/versions/{v}].
func (c *GenerateClient) modelPath() string {
	p := "/v2/models/" + url.PathEscape(c.model)
	if c.version != "" {
		p += "/versions/" + url.PathEscape(c.version)
	}
	return p
}

// generateBody builds the request body by the model's tensors: what
// buildRequest sends as tensors goes as keys of those names; max_tokens
// and sampling options go in "parameters" (the vLLM backend reads them
// there) or, for TensorRT-LLM, as the max_tokens key.
func (c *GenerateClient) generateBody(spec *modelSpec, p *prompts.Prompt, maxTokens int) ([]byte, error) {
	body := map[string]any{inText: p.Completion()}
	params := map[string]any{}
	set := func(name string, v any) {
		if spec.has(name) {
			body[name] = v
		}
	}
	set(inStream, c.root.Stream)
	set(inExclude, true)
	if spec.known {
		set(inRetInTokens, true)
		set(inRetOutTokens, true)
	}
	if maxTokens > 0 {
		if spec.tensors == TensorsTRTLLM {
			body[inMaxTokens] = maxTokens
		} else {
			params[inMaxTokens] = maxTokens
		}
	}
	for k, v := range p.Params {
		switch {
		case k == paramsKey:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("params.parameters: want an object, got %T", v)
			}
			for pk, pv := range m {
				params[pk] = pv
			}
		case k == inText || k == inStream:
			return nil, fmt.Errorf("params.%s: set by tailgate", k)
		case spec.has(k):
			body[k] = v
		default:
			params[k] = v
		}
	}
	if len(params) > 0 {
		body[paramsKey] = params
	}
	return transport.EncodeJSON(body)
}

// generateEvent is one generate response: text_output and the counts,
// each a value or an array of them, or an error.
type generateEvent struct {
	Error      json.RawMessage `json:"error"`
	ModelName  json.RawMessage `json:"model_name"`
	Text       json.RawMessage `json:"text_output"`
	OutTokens  json.RawMessage `json:"num_output_tokens"`
	InTokens   json.RawMessage `json:"num_input_tokens"`
	FinishText json.RawMessage `json:"finish_reason"`
}

// decode fills ev (as the gRPC path's event) from one JSON response.
func (g *generateEvent) decode(b []byte, ev *event) error {
	*g = generateEvent{}
	ev.reset()
	if err := json.Unmarshal(b, g); err != nil {
		return err
	}
	if len(g.Error) > 0 && string(g.Error) != "null" {
		var s string
		if json.Unmarshal(g.Error, &s) != nil {
			s = string(g.Error)
		}
		ev.errMsg = []byte(s)
		if len(ev.errMsg) == 0 {
			ev.errMsg = []byte("(no message)")
		}
		return nil
	}
	var err error
	// The model's name is not a measurement: one the fast path cannot
	// read is left out rather than failing the request.
	if m, merr := jsonText(g.ModelName, nil); merr == nil {
		ev.model = m
	}
	if ev.text, err = jsonText(g.Text, ev.text); err != nil {
		return fmt.Errorf("text_output: %w", err)
	}
	if ev.finish, err = jsonText(g.FinishText, ev.finish); err != nil {
		return fmt.Errorf("finish_reason: %w", err)
	}
	if ev.tokens, err = jsonCount(g.OutTokens); err != nil {
		return fmt.Errorf("num_output_tokens: %w", err)
	}
	if ev.inTokens, err = jsonCount(g.InTokens); err != nil {
		return fmt.Errorf("num_input_tokens: %w", err)
	}
	return nil
}

// jsonText appends a string or an array of strings.
func jsonText(raw json.RawMessage, b []byte) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return b, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return append(b, s...), nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return b, errors.New("want a string or an array of strings")
	}
	for _, s := range ss {
		b = append(b, s...)
	}
	return b, nil
}

// jsonCount sums a number or an array of numbers; -1 when absent.
func jsonCount(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return -1, nil
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n, nil
	}
	var ns []int64
	if err := json.Unmarshal(raw, &ns); err != nil {
		return -1, errors.New("want a whole number or an array of them")
	}
	n = 0
	for _, x := range ns {
		n += x
	}
	return n, nil
}

// Do sends p and fills rec, with the instants of the gRPC path: a chunk
// per event with non-empty text_output, End at the end of the body.
func (c *GenerateClient) Do(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
	maxTokens := p.MaxTokens
	if maxTokens == 0 {
		maxTokens = c.root.MaxTokens
	}
	rec.MaxTokens = maxTokens
	body, err := c.generateBody(c.spec.Load(), p, maxTokens)
	if err != nil {
		c.root.HTTP.FailBuilding(rec, err)
		return
	}
	post := transport.Post{URL: c.root.Base + c.modelPath() + "/generate", Body: body, ID: p.ID, Header: p.Headers, ErrorWords: transport.ErrorWords}
	if c.root.Stream {
		post.URL, post.Accept = c.root.Base+c.modelPath()+"/generate_stream", "text/event-stream"
	}
	resp := c.root.HTTP.Send(ctx, rec, post)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	s := response{rec: rec, sent: c.model, keepText: p.FollowUp != nil}
	defer s.settle()
	var g generateEvent
	ct := strings.ToLower(resp.Header.Get("Content-Type"))
	if !strings.HasPrefix(ct, "text/event-stream") {
		rec.Unstreamed = true
		b, kind, msg := transport.ReadWhole(ctx, resp.Body, maxGenerateBody)
		rec.End = rec.Now()
		if kind != loadgen.ErrNone {
			c.root.HTTP.Fail(rec, kind, msg)
			return
		}
		if err := g.decode(b, &s.ev); err != nil {
			c.root.HTTP.Fail(rec, loadgen.ErrProtocol, "bad response JSON: "+err.Error())
			return
		}
		if len(s.ev.errMsg) > 0 {
			c.root.HTTP.Fail(rec, loadgen.ErrStreamError, "error in response: "+transport.Truncate(string(s.ev.errMsg), transport.MaxErrorMessage))
			return
		}
		s.feedWhole(&s.ev)
		return
	}
	sc := sse.NewScanner(resp.Body)
	for sc.Next() {
		data := bytes.TrimSpace(sc.Data())
		if len(data) == 0 {
			continue
		}
		if err := g.decode(data, &s.ev); err != nil {
			rec.End = rec.Now()
			c.root.HTTP.Fail(rec, loadgen.ErrProtocol, fmt.Sprintf("event %d: bad JSON: %v", s.n+1, err))
			return
		}
		if len(s.ev.errMsg) > 0 {
			rec.End = rec.Now()
			c.root.HTTP.Fail(rec, loadgen.ErrStreamError, "error event in stream: "+transport.Truncate(string(s.ev.errMsg), transport.MaxErrorMessage))
			return
		}
		s.feed(&s.ev)
		if rec.Overran() {
			// Not read on: a server that ignores max_tokens may never end.
			rec.End = rec.Now()
			rec.OverGeneration()
			return
		}
	}
	rec.End = rec.Now()
	switch err := sc.Err(); {
	case err != nil:
		kind, msg := transport.ClassifyBody(ctx, err, s.where())
		c.root.HTTP.Fail(rec, kind, msg)
	case s.n == 0:
		c.root.HTTP.Fail(rec, loadgen.ErrStreamTruncated, "stream ended without any response")
	case sc.PartialLine():
		c.root.HTTP.Fail(rec, loadgen.ErrStreamTruncated, "stream ended inside an event "+s.where())
	}
}

// Preflight checks, as the gRPC client does, that the server is live
// (GET /v2/health/live) and ready (/v2/health/ready), that the model is
// ready (/v2/models/{model}/ready), and reads its tensors (GET
// /v2/models/{model}).
func (c *GenerateClient) Preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	if c.model == "" {
		return fmt.Errorf("target %s: %w", c.root.SafeBase, field.Errorf("Model", "not given"))
	}
	for _, step := range []struct{ path, what string }{{"/v2/health/live", "live"}, {"/v2/health/ready", "ready"}} {
		_, err := c.root.Get(ctx, step.path, transport.MaxErrorBody)
		if se := (*transport.StatusError)(nil); errors.As(err, &se) && !se.Refused() {
			return fmt.Errorf("the server says it is not %s: %w", step.what, err)
		}
		if err != nil {
			return err // names the target and what was tried
		}
	}
	_, err := c.root.Get(ctx, c.modelPath()+"/ready", transport.MaxErrorBody)
	if se := (*transport.StatusError)(nil); errors.As(err, &se) && !se.Refused() {
		return fmt.Errorf("model %q is not ready (not loaded, still loading, or not served): %w", c.model, err)
	}
	if err != nil {
		return err
	}
	b, err := c.root.Get(ctx, c.modelPath(), transport.MaxErrorBody)
	if err != nil {
		return fmt.Errorf("model %q metadata: %w", c.model, err)
	}
	var md struct {
		Name    string `json:"name"`
		Inputs  []tensorJSON
		Outputs []tensorJSON
	}
	if err := json.Unmarshal(b, &md); err != nil {
		return fmt.Errorf("target %s: model %q metadata: %w", c.root.SafeBase, c.model, err)
	}
	m := &pb.ModelMetadataResponse{Name: md.Name}
	for _, t := range md.Inputs {
		m.Inputs = append(m.Inputs, t.pb())
	}
	for _, t := range md.Outputs {
		m.Outputs = append(m.Outputs, t.pb())
	}
	spec, err := specFromMetadata(m, c.tensors)
	if err != nil {
		return fmt.Errorf("target %s: %v", c.root.SafeBase, c.root.HTTP.Scrub(err.Error()))
	}
	c.spec.Store(spec)
	return nil
}

type tensorJSON struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

func (t tensorJSON) pb() *pb.ModelMetadataResponse_TensorMetadata {
	return &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape}
}

// Prepare is Preflight (protocol.Preparer).
func (c *GenerateClient) Prepare(ctx context.Context) error { return c.Preflight(ctx) }

// DescribeServer reports GET /v2's name and version.
func (c *GenerateClient) DescribeServer(ctx context.Context) loadgen.ServerInfo {
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	info := loadgen.ServerInfo{URL: c.root.SafeBase}
	if c.model != "" {
		info.Models = []string{c.model}
	}
	b, err := c.root.Get(ctx, "/v2", transport.MaxErrorBody)
	if err != nil {
		info.Error = err.Error()
		return info
	}
	var sm struct{ Name, Version string }
	if json.Unmarshal(b, &sm) == nil {
		info.Headers = map[string]string{"server": c.root.HTTP.Scrub(sm.Name), "server-version": c.root.HTTP.Scrub(sm.Version)}
	}
	return info
}

// DiscoverModel returns the first ready model of POST /v2/repository/index.
func (c *GenerateClient) DiscoverModel(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	b, err := c.root.Side(ctx, http.MethodPost, "/v2/repository/index", transport.MaxErrorBody)
	if err != nil {
		return "", &transport.Undiscovered{Target: c.root.SafeBase, Err: err}
	}
	var idx []struct{ Name, State string }
	if err := json.Unmarshal(b, &idx); err != nil {
		return "", &transport.Undiscovered{Target: c.root.SafeBase, Err: fmt.Errorf("target %s: POST /v2/repository/index: %w", c.root.SafeBase, err)}
	}
	var names []string
	for _, m := range idx {
		if m.State == "" || m.State == "READY" {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return "", &transport.Undiscovered{Target: c.root.SafeBase, Why: "POST /v2/repository/index lists no ready model"}
	}
	slices.Sort(names)
	return names[0], nil
}

// SetModel sets the model requests name. Call it before the first Do.
func (c *GenerateClient) SetModel(m string) { c.model = m }

// CloseIdleConnections closes kept-alive connections.
func (c *GenerateClient) CloseIdleConnections() { c.root.HTTP.CloseIdleConnections() }
