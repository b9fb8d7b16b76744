package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Reading an OpenAI completion request body, as vLLM reads it.

// apiRequest is the part of an OpenAI request body the simulator reads.
type apiRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Prompt json.RawMessage `json:"prompt"`
	Tools  []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	N                   *int `json:"n"`
	Stream              bool `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
}

// parsedRequest is a validated completion request.
type parsedRequest struct {
	chat, stream, includeUsage, contUsage bool
	promptTokens, maxTokens               int
	model                                 string // as the request named it ("" for none)
	// blocks are the prompt's full blocks' hashes (nil with the prefix
	// cache off or a prompt shorter than a block).
	blocks []uint64
	// tool is the first tool's function name when the request carries
	// tools ("" for none).
	tool     string
	hasTools bool
}

// requestError is a 4xx answer to a bad request.
type requestError struct {
	status int
	typ    string
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &requestError{http.StatusBadRequest, "BadRequestError", fmt.Sprintf(format, a...)}
}

// contentText reads a chat message content: a string, an array of parts
// (their "text" fields), or null.
func contentText(raw json.RawMessage) (string, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content: want a string or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func (s *Server) parse(body []byte, chat bool) (*parsedRequest, error) {
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badRequest("request body: %v", err)
	}
	if (s.cfg.StrictModel || len(s.cfg.Adapters) > 0) && req.Model != "" && req.Model != s.cfg.Model && !slices.Contains(s.cfg.Adapters, req.Model) {
		return nil, &requestError{http.StatusNotFound, "NotFoundError",
			fmt.Sprintf("The model `%s` does not exist.", req.Model)}
	}
	p := &parsedRequest{chat: chat, stream: req.Stream, model: req.Model}
	if req.StreamOptions != nil && req.Stream {
		p.includeUsage = req.StreamOptions.IncludeUsage
		p.contUsage = req.StreamOptions.IncludeUsage && req.StreamOptions.ContinuousUsageStats
	}
	if req.N != nil && *req.N != 1 {
		return nil, badRequest("n=%d: the simulator generates one choice (n=1)", *req.N)
	}
	if chat {
		if len(req.Messages) == 0 {
			return nil, badRequest("messages: at least one message is required")
		}
		// Each message on its own, as prompts sizes a system prefix and a
		// body apart; the template's markers are PromptOverheadTokens.
		n := 0
		texts := make([]string, len(req.Messages))
		for i, m := range req.Messages {
			text, err := contentText(m.Content)
			if err != nil {
				return nil, badRequest("messages[%d]: %v", i, err)
			}
			texts[i] = text
			n += s.cfg.TokenCounter(text)
		}
		p.promptTokens = n + s.cfg.PromptOverheadTokens
		p.blocks = s.blockHashes(req.Model, p.promptTokens, texts, nil)
	} else {
		n, ids, text, err := s.promptTokens(req.Prompt)
		if err != nil {
			return nil, err
		}
		p.promptTokens = n
		if ids != nil {
			p.blocks = s.blockHashes(req.Model, n, nil, ids)
		} else {
			p.blocks = s.blockHashes(req.Model, n, []string{text}, nil)
		}
	}
	if chat && len(req.Tools) > 0 {
		p.hasTools, p.tool = true, req.Tools[0].Function.Name
	}
	p.maxTokens = s.cfg.DefaultMaxTokens
	switch {
	case req.MaxCompletionTokens != nil:
		p.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		p.maxTokens = *req.MaxTokens
	}
	if p.maxTokens < 1 {
		return nil, badRequest("max_tokens must be at least 1, got %d.", p.maxTokens)
	}
	if len(s.engines) > 0 && p.promptTokens+p.maxTokens > s.cfg.KVTokens {
		return nil, badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.KVTokens, p.promptTokens+p.maxTokens, p.promptTokens, p.maxTokens)
	}
	return p, nil
}

// promptTokens counts a completions prompt: a string or a one-element array
// of strings (plus PromptOverheadTokens), or token ids (counted exactly, as
// given). It returns the ids, or else the text.
func (s *Server) promptTokens(raw json.RawMessage) (int, []int, string, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil, "", badRequest("prompt: required")
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return s.cfg.TokenCounter(str) + s.cfg.PromptOverheadTokens, nil, str, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		if len(strs) != 1 {
			return 0, nil, "", badRequest("prompt: the simulator takes one prompt, got %d", len(strs))
		}
		return s.cfg.TokenCounter(strs[0]) + s.cfg.PromptOverheadTokens, nil, strs[0], nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return len(ids), ids, "", nil
	}
	return 0, nil, "", badRequest("prompt: want a string, one string in an array, or token ids")
}

// blockHashes names a prompt of n tokens (texts in order, or token ids)
// block by block for the prefix cache. The model or adapter seeds the
// chain, as vLLM keys an adapter's blocks apart; a chat template's
// PromptOverheadTokens come first, the same in every prompt.
func (s *Server) blockHashes(model string, n int, texts []string, ids []int) []uint64 {
	if s.cfg.PrefixCacheBlocks <= 0 || n < s.cfg.BlockSize {
		return nil
	}
	if model == "" {
		model = s.cfg.Model
	}
	seed := uint64(fnvOffset)
	for i := 0; i < len(model); i++ {
		seed ^= uint64(model[i])
		seed *= fnvPrime
	}
	b := newBlockHasher(seed, s.cfg.BlockSize, n)
	if ids != nil {
		for _, id := range ids {
			b.token(uint64(id))
		}
		return b.done()
	}
	for k := range s.cfg.PromptOverheadTokens {
		b.token(uint64(k) | 1<<63) // the template's markers: the same ids in every prompt
	}
	for _, t := range texts {
		b.text(t)
	}
	return b.done()
}
