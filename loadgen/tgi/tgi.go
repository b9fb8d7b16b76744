// Package tgi is the protocol client for Hugging Face TGI's native API
// (--api tgi-generate): POST /generate_stream, Server-Sent Events with one
// generated token per event and no [DONE] (the last event carries
// generated_text, and details when asked), or POST /generate for one
// answer. It implements loadgen.Client with the OpenAI path's instants:
// a chunk per event whose token has text and is not special, at its
// arrival; End at the final event.
//
// Every event is one token, so chunk token counts are exact: a special or
// empty token (end of sequence) is counted on the next chunk, or the last.
// details.generated_tokens and input_length (details is always asked for)
// give OutputTokens and InputTokens. An event {"error": …, "error_type":
// …} inside the 200 stream is stream_error; a stream that ends before the
// generated_text event is stream_truncated (TGI's own
// IncompleteGenerationStream).
package tgi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/sse"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// API is the --api name.
const API = "tgi-generate"

const (
	maxBody     = 64 << 20
	sideTimeout = 10 * time.Second
)

// Config describes one TGI target: URL is the server root
// (http://tgi:8080); Model is informational, as TGI serves one model, and
// when set Preflight checks it against /info's model_id; Stream uses
// /generate_stream, false /generate; MaxTokens is sent as
// parameters.max_new_tokens when a prompt sets none.
type Config = transport.RootConfig

// Client sends requests to one TGI server. It is safe for concurrent use.
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
		return nil, fmt.Errorf("tgi: %w", err)
	}
	return &Client{root: root, model: cfg.Model}, nil
}

// event is one /generate_stream event, or the /generate answer.
type event struct {
	Token *struct {
		Text    string `json:"text"`
		Special bool   `json:"special"`
	} `json:"token"`
	GeneratedText *string `json:"generated_text"`
	Details       *struct {
		FinishReason    string `json:"finish_reason"`
		GeneratedTokens int    `json:"generated_tokens"`
		InputLength     int    `json:"input_length"`
	} `json:"details"`
	Error     *string `json:"error"`
	ErrorType string  `json:"error_type"`
}

func (c *Client) body(p *prompts.Prompt, maxTokens int) ([]byte, error) {
	params := map[string]any{"details": true}
	if maxTokens > 0 {
		params["max_new_tokens"] = maxTokens
	}
	for k, v := range p.Params {
		if k != "model" {
			params[k] = v
		}
	}
	// TGI serves one base model; a named model is a LoRA adapter, which
	// its native API takes as parameters.adapter_id.
	if m := p.ModelName(); m != "" && m != c.model {
		params["adapter_id"] = m
	}
	return transport.EncodeJSON(map[string]any{"inputs": p.Completion(), "parameters": params})
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
	endpoint := "/generate"
	if c.root.Stream {
		endpoint = "/generate_stream"
	}
	resp := c.root.HTTP.Send(ctx, rec, transport.Post{URL: c.root.Base + endpoint, Body: body, ID: p.ID, Header: p.Headers, ErrorWords: transport.ErrorWords})
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	keepText := p.FollowUp != nil
	var text []byte
	if !strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		rec.Unstreamed = true
		b, kind, msg := transport.ReadWhole(ctx, resp.Body, maxBody)
		rec.End = rec.Now()
		var ev event
		switch {
		case kind != loadgen.ErrNone:
			c.root.HTTP.Fail(rec, kind, msg)
			return
		case json.Unmarshal(b, &ev) != nil:
			c.root.HTTP.Fail(rec, loadgen.ErrProtocol, "bad response JSON")
			return
		case ev.Error != nil:
			c.root.HTTP.Fail(rec, loadgen.ErrStreamError, "error in response: "+transport.DescribeError(*ev.Error, "", ev.ErrorType))
			return
		}
		if ev.GeneratedText != nil && *ev.GeneratedText != "" {
			rec.Chunks = append(rec.Chunks, loadgen.Chunk{At: rec.End})
			rec.FirstAnswer = rec.End
			text = []byte(*ev.GeneratedText)
		}
		c.details(rec, &ev)
		if len(rec.Chunks) == 1 && rec.OutputTokens > 0 {
			rec.Chunks[0].Tokens = rec.OutputTokens
		}
		if keepText {
			rec.Text = string(text)
		}
		return
	}
	sc := sse.NewScanner(resp.Body)
	events, pending, final := 0, 0, false
	for !final && sc.Next() {
		data := bytes.TrimSpace(sc.Data())
		if len(data) == 0 {
			continue // a keep-alive comment
		}
		events++
		var ev event
		if err := json.Unmarshal(data, &ev); err != nil {
			rec.End = rec.Now()
			c.root.HTTP.Fail(rec, loadgen.ErrProtocol, fmt.Sprintf("event %d: bad JSON: %v", events, err))
			return
		}
		if ev.Error != nil {
			rec.End = rec.Now()
			c.root.HTTP.Fail(rec, loadgen.ErrStreamError, "error event in stream: "+transport.DescribeError(*ev.Error, "", ev.ErrorType))
			return
		}
		if ev.Token != nil {
			pending++
			if !ev.Token.Special && ev.Token.Text != "" {
				at := rec.Now()
				rec.AddChunk(loadgen.Chunk{At: at, Tokens: pending})
				pending = 0
				if rec.FirstAnswer == 0 {
					rec.FirstAnswer = at
				}
				if keepText {
					text = append(text, ev.Token.Text...)
				}
			}
			if rec.Overran() || pending > loadgen.OutputBound(rec.MaxTokens) && rec.MaxTokens > 0 {
				// Not read on: a server that ignores max_new_tokens may never end.
				rec.End = rec.Now()
				rec.OverGeneration()
				return
			}
		}
		if ev.GeneratedText != nil {
			final = true
			c.details(rec, &ev)
		}
	}
	rec.End = rec.Now()
	if n := len(rec.Chunks); n > 0 && pending > 0 {
		rec.Chunks[n-1].Tokens += pending
	}
	if keepText {
		rec.Text = string(text)
	}
	if final {
		if rec.OutputTokens == 0 { // no details: one token per event
			rec.OutputTokens = events
			rec.TokenSource = loadgen.TokensFromChunks
		}
		return
	}
	if err := sc.Err(); err != nil {
		kind, msg := transport.ClassifyBody(ctx, err, fmt.Sprintf("after %d events", events))
		c.root.HTTP.Fail(rec, kind, msg)
		return
	}
	c.root.HTTP.Fail(rec, loadgen.ErrStreamTruncated, fmt.Sprintf("stream ended without generated_text after %d events", events))
}

func (c *Client) details(rec *loadgen.Record, ev *event) {
	if d := ev.Details; d != nil {
		rec.FinishReason = d.FinishReason
		if d.GeneratedTokens > 0 {
			rec.OutputTokens = d.GeneratedTokens
			rec.TokenSource = loadgen.TokensFromUsage
		}
		if d.InputLength > 0 {
			rec.InputTokens = d.InputLength
		}
	}
}

// info is GET /info.
func (c *Client) info(ctx context.Context) (modelID, version string, err error) {
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	b, err := c.root.Get(ctx, "/info", transport.MaxErrorBody)
	if err != nil {
		return "", "", err
	}
	var in struct {
		ModelID string `json:"model_id"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return "", "", fmt.Errorf("target %s: GET /info: %w", c.root.SafeBase, err)
	}
	return in.ModelID, in.Version, nil
}

// Preflight checks that /info answers and, when a model is named, that it
// is the one served.
func (c *Client) Preflight(ctx context.Context) error {
	id, _, err := c.info(ctx)
	if err != nil {
		return err // names the target and what was tried
	}
	if c.model != "" && id != "" && id != c.model {
		return loadgen.NotServed(fmt.Errorf("target %s does not serve model %q: it serves %q", c.root.SafeBase, c.model, id))
	}
	return nil
}

// DiscoverModel returns /info's model_id.
func (c *Client) DiscoverModel(ctx context.Context) (string, error) {
	id, _, err := c.info(ctx)
	if err != nil {
		return "", &transport.Undiscovered{Target: c.root.SafeBase, Err: err}
	}
	if id == "" {
		return "", &transport.Undiscovered{Target: c.root.SafeBase, Why: "GET /info names no model_id"}
	}
	return id, nil
}

// SetModel sets the model Preflight checks for.
func (c *Client) SetModel(m string) { c.model = m }

// DescribeServer reports /info's model and version.
func (c *Client) DescribeServer(ctx context.Context) loadgen.ServerInfo {
	info := loadgen.ServerInfo{URL: c.root.SafeBase}
	id, v, err := c.info(ctx)
	if err != nil {
		info.Error = err.Error()
		return info
	}
	info.Models = []string{id}
	info.Headers = map[string]string{"server": "text-generation-inference", "server-version": c.root.HTTP.Scrub(v)}
	return info
}

// CloseIdleConnections closes kept-alive connections.
func (c *Client) CloseIdleConnections() { c.root.HTTP.CloseIdleConnections() }
