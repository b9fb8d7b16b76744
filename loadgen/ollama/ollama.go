// Package ollama is the protocol client for Ollama's native chat API
// (--api ollama-chat): POST /api/chat, answered as newline-delimited JSON
// objects ("stream": true) or one object. It implements loadgen.Client
// with the OpenAI path's instants: a chunk per object whose message has
// content or thinking, at its arrival; FirstAnswer at the first content;
// End at the object with "done": true.
//
// The final object's eval_count and prompt_eval_count give OutputTokens
// and InputTokens (Ollama counts exactly; chunk counts are then spread
// over the chunks), done_reason the finish reason, and total_duration,
// load_duration, prompt_eval_duration and eval_duration the record's
// server timings (the queue wait is what is left of the total). eval_count
// counts an end-of-sequence token that is never streamed (done_reason
// "stop"): Record.Finalize gives it to no chunk, as llama.cpp's. An {"error": …} object
// inside the stream is stream_error (the HTTP status stays 200); a body
// that ends before "done": true is stream_truncated.
package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// API is the --api name.
const API = "ollama-chat"

const (
	maxLineBytes = 16 << 20
	maxTagsBytes = 4 << 20
	sideTimeout  = 10 * time.Second
)

// Config describes one Ollama target: URL is the server root
// (http://127.0.0.1:11434), Stream asks for NDJSON, MaxTokens is sent as
// options.num_predict when a prompt sets none.
type Config = transport.RootConfig

// Client sends requests to one Ollama server. It is safe for concurrent use.
type Client struct {
	root  transport.Root
	model string
}

var (
	_ loadgen.Client          = (*Client)(nil)
	_ loadgen.ModelDiscoverer = (*Client)(nil)
	_ loadgen.Preflighter     = (*Client)(nil)
	_ loadgen.ServerDescriber = (*Client)(nil)
)

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	root, err := cfg.Open("base URL")
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}
	return &Client{root: root, model: cfg.Model}, nil
}

// object is one NDJSON line, or the whole answer.
type object struct {
	// Model is the model the server says answered (every object names it).
	Model   string `json:"model"`
	Message *struct {
		Content  string `json:"content"`
		Thinking string `json:"thinking"`
	} `json:"message"`
	// Response is /api/generate's text field: read too, so a proxy that
	// answers chat in the generate shape still measures.
	Response        string  `json:"response"`
	Done            bool    `json:"done"`
	DoneReason      string  `json:"done_reason"`
	EvalCount       int     `json:"eval_count"`
	PromptEvalCount int     `json:"prompt_eval_count"`
	Error           *string `json:"error"`
	// The server's timings of the request, in nanoseconds.
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalDuration       int64 `json:"eval_duration"`
}

func (c *Client) body(p *prompts.Prompt, maxTokens int) ([]byte, error) {
	opts := map[string]any{}
	if maxTokens > 0 {
		opts["num_predict"] = maxTokens
	}
	for k, v := range p.Params {
		if k != "model" { // a top-level field, not an option
			opts[k] = v
		}
	}
	m := map[string]any{"model": c.sentModel(p), "messages": p.Chat(), "stream": c.root.Stream}
	if len(opts) > 0 {
		m["options"] = opts
	}
	return transport.EncodeJSON(m)
}

// sentModel is the model a request for p names: the prompt's own, else
// the run's.
func (c *Client) sentModel(p *prompts.Prompt) string {
	if pm := p.ModelName(); pm != "" {
		return pm
	}
	return c.model
}

// Do sends p and fills rec.
func (c *Client) Do(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
	maxTokens := p.MaxTokens
	if maxTokens == 0 {
		maxTokens = c.root.MaxTokens
	}
	rec.MaxTokens = maxTokens
	body, err := c.body(p, maxTokens)
	if err != nil {
		c.root.HTTP.FailBuilding(rec, err)
		return
	}
	// Ollama ignores the X-Request-Id; proxies and the simulator log it.
	resp := c.root.HTTP.Send(ctx, rec, transport.Post{URL: c.root.Base + "/api/chat", Body: body, ID: p.ID, Header: p.Headers, ErrorWords: transport.ErrorWords})
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	rec.Unstreamed = !c.root.Stream
	keepText := p.FollowUp != nil
	var text []byte
	r := bufio.NewReaderSize(resp.Body, 16<<10)
	lines, done := 0, false
	for !done {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			lines++
			var o object
			if jerr := json.Unmarshal(line, &o); jerr != nil {
				rec.End = rec.Now()
				if err != nil && !errors.Is(err, io.EOF) || errors.Is(err, io.EOF) && !bytes.HasSuffix(line, []byte("\n")) && c.root.Stream {
					c.root.HTTP.Fail(rec, loadgen.ErrStreamTruncated, fmt.Sprintf("body cut inside object %d", lines))
					return
				}
				c.root.HTTP.Fail(rec, loadgen.ErrProtocol, fmt.Sprintf("object %d: bad JSON: %v", lines, jerr))
				return
			}
			if o.Error != nil {
				rec.End = rec.Now()
				c.root.HTTP.Fail(rec, loadgen.ErrStreamError, "error in stream: "+transport.Truncate(*o.Error, transport.MaxErrorMessage))
				return
			}
			if rec.ResponseModel == "" && o.Model != "" {
				rec.ResponseModel = o.Model
				if sent := c.sentModel(p); o.Model == sent {
					rec.ResponseModel = sent // shares the sent string
				}
			}
			content, thinking := o.Response, ""
			if m := o.Message; m != nil {
				content, thinking = m.Content+content, m.Thinking
			}
			if content != "" || thinking != "" {
				at := rec.Now()
				rec.AddChunk(loadgen.Chunk{At: at})
				if content != "" && rec.FirstAnswer == 0 {
					rec.FirstAnswer = at
				}
				if keepText {
					text = append(text, content...)
				}
				if rec.Overran() {
					// Not read on: a server that ignores num_predict may never end.
					rec.End = rec.Now()
					rec.OverGeneration()
					return
				}
			}
			if o.Done {
				done = true
				rec.FinishReason = o.DoneReason
				if o.EvalCount > 0 {
					rec.OutputTokens = o.EvalCount
					rec.TokenSource = loadgen.TokensFromUsage
				}
				if o.PromptEvalCount > 0 {
					rec.InputTokens = o.PromptEvalCount
				}
				if o.TotalDuration > 0 || o.PromptEvalDuration > 0 || o.EvalDuration > 0 {
					rec.Server = &loadgen.ServerTimings{Total: time.Duration(o.TotalDuration), Load: time.Duration(o.LoadDuration),
						Prompt: time.Duration(o.PromptEvalDuration), Eval: time.Duration(o.EvalDuration)}
				}
			}
		}
		if err != nil {
			break
		}
	}
	rec.End = rec.Now()
	if keepText {
		rec.Text = string(text)
	}
	if done {
		return
	}
	c.root.HTTP.Fail(rec, loadgen.ErrStreamTruncated, fmt.Sprintf("body ended without \"done\": true after %d objects", lines))
}

// readLine reads one line (with its \n) of at most maxLineBytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		b, err := r.ReadSlice('\n')
		out = append(out, b...)
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(out) > maxLineBytes {
				return out, errors.New("line too long")
			}
			continue
		}
		return out, err
	}
}

// tags lists GET /api/tags's model names.
func (c *Client) tags(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	b, err := c.root.Get(ctx, "/api/tags", maxTagsBytes)
	if err != nil {
		return nil, err
	}
	var list struct {
		Models []struct {
			Name, Model string
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("target %s: GET /api/tags: %w", c.root.SafeBase, err)
	}
	var names []string
	for _, m := range list.Models {
		if m.Name != "" {
			names = append(names, m.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// has reports whether names holds m, an untagged name meaning ":latest".
func has(names []string, m string) bool {
	return slices.Contains(names, m) || !strings.Contains(m, ":") && slices.Contains(names, m+":latest")
}

// Preflight checks that the server answers and has the model pulled.
func (c *Client) Preflight(ctx context.Context) error {
	names, err := c.tags(ctx)
	if err != nil {
		return err // names the target and what was tried
	}
	if c.model != "" && !has(names, c.model) {
		return loadgen.NotServed(fmt.Errorf("target %s does not have model %q (pull it first); it has %q", c.root.SafeBase, c.model, names))
	}
	return nil
}

// DiscoverModel returns the first model /api/tags lists.
func (c *Client) DiscoverModel(ctx context.Context) (string, error) {
	names, err := c.tags(ctx)
	if err != nil {
		return "", &transport.Undiscovered{Target: c.root.SafeBase, Err: err}
	}
	if len(names) == 0 {
		return "", &transport.Undiscovered{Target: c.root.SafeBase, Why: "GET /api/tags lists no model (pull one first)"}
	}
	return names[0], nil
}

// SetModel sets the model requests name. Call it before the first Do.
func (c *Client) SetModel(m string) { c.model = m }

// DescribeServer reports the models the server has, its version
// (/api/version) and the model's details and context length (/api/show).
func (c *Client) DescribeServer(ctx context.Context) loadgen.ServerInfo {
	info := loadgen.ServerInfo{URL: c.root.SafeBase}
	names, err := c.tags(ctx)
	if err != nil {
		info.Error = err.Error()
	}
	info.Models = names
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	if code, b, err := c.root.HTTP.Fetch(ctx, http.MethodGet, c.root.Base+"/api/version", maxTagsBytes); err == nil && code == http.StatusOK {
		var v struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &v) == nil {
			info.Version = v.Version
		}
	}
	if c.model == "" {
		return info
	}
	body, _ := transport.EncodeJSON(map[string]any{"model": c.model})
	req, err := c.root.HTTP.NewRequest(ctx, http.MethodPost, c.root.Base+"/api/show", bytes.NewReader(body))
	if err != nil {
		return info
	}
	resp, _, err := c.root.HTTP.Do(req)
	if err != nil {
		return info
	}
	defer resp.Body.Close()
	var show struct {
		Details   map[string]any `json:"details"`
		ModelInfo map[string]any `json:"model_info"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, maxTagsBytes)).Decode(&show) != nil {
		return info
	}
	for k, v := range show.Details {
		if s, ok := v.(string); ok && s != "" {
			if info.ModelDetails == nil {
				info.ModelDetails = map[string]string{}
			}
			info.ModelDetails[k] = s
		}
	}
	for k, v := range show.ModelInfo {
		if n, ok := v.(float64); ok && strings.HasSuffix(k, ".context_length") {
			info.ContextLength = int(n)
		}
	}
	return info
}

// CloseIdleConnections closes kept-alive connections.
func (c *Client) CloseIdleConnections() { c.root.HTTP.CloseIdleConnections() }
