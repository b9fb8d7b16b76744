package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// The OpenAI-compatible API: /v1/chat/completions and /v1/completions
// (through the exchange, answered by a responder, stream.go), /v1/models.

// listedModel is one /v1/models entry in vLLM's form.
type listedModel struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len"`
}

// modelList is the base model, then each LoRA adapter with the base as
// its parent, as vLLM lists --lora-modules.
func (s *Server) modelList() []listedModel {
	out := []listedModel{{ID: s.cfg.Model, Object: "model", Created: s.epoch.Unix(),
		OwnedBy: "tailgate-sim", Root: s.cfg.Model, MaxModelLen: s.cfg.KVTokens}}
	for _, a := range s.cfg.Adapters {
		base := s.cfg.Model
		out = append(out, listedModel{ID: a, Object: "model", Created: s.epoch.Unix(),
			OwnedBy: "tailgate-sim", Root: a, Parent: &base, MaxModelLen: s.cfg.KVTokens})
	}
	return out
}

func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request) {
	body, _ := json.Marshal(struct {
		Object string        `json:"object"`
		Data   []listedModel `json:"data"`
	}{"list", s.modelList()})
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// writeError sends an OpenAI/vLLM-style error body.
func (s *Server) writeError(w http.ResponseWriter, rec *truthRec, status int, typ, msg string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": status}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	w.Write(body)
	now := time.Now()
	rec.update(func(t *Truth) {
		t.Status = status
		t.Headers = now
		if t.Outcome == "" {
			t.Outcome = "error"
		}
	})
}

func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, chat bool) {
	arrived := time.Now()
	if !s.enter() {
		s.writeError(w, nil, http.StatusServiceUnavailable, "ServiceUnavailableError", "the simulator is shutting down")
		return
	}
	defer s.leave()
	x := s.newExchange(r.Context(), r.Header.Get("X-Request-Id"), r.URL.Path, arrived)
	w.Header().Set("X-Request-Id", x.id)
	if s.cfg.CloseAfter != CloseNever {
		// What llama-server says before it closes the connection anyway.
		w.Header().Set("Keep-Alive", "timeout=5, max=100")
	}
	defer func() { s.truth.finish(x.rec, time.Now()) }()
	if err := x.pickFault(r.Header.Get("X-Sim-Fault")); err != nil {
		io.Copy(io.Discard, io.LimitReader(r.Body, maxBodyBytes))
		s.writeError(w, x.rec, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		x.outcome("cancelled")
		return
	}
	if len(body) > maxBodyBytes {
		s.writeError(w, x.rec, http.StatusRequestEntityTooLarge, "BadRequestError", "request body too large")
		return
	}
	req, err := s.parse(body, chat)
	if err != nil {
		var re *requestError
		errors.As(err, &re)
		s.writeError(w, x.rec, re.status, re.typ, re.msg)
		return
	}
	if x.fault == FaultIgnoreStream {
		req.stream, req.includeUsage, req.contUsage = false, false, false
	}
	content := req.maxTokens
	if s.cfg.EOSNotStreamed {
		content-- // the last token is an EOS, made but not sent
	}
	x.shape(req.promptTokens, req.maxTokens, content, req.stream)
	x.blocks = req.blocks
	tool := ""
	if req.chat && x.fault != FaultEmpty && !(req.stream && s.cfg.Dialect == DialectLlamaCpp) &&
		(req.hasTools || toolDraw(s.cfg.ToolCallShare, s.cfg.Seed, x.seqNo)) {
		tool, x.tool = req.tool, true
		if tool == "" {
			tool = defaultToolName
		}
	}
	x.rec.update(func(t *Truth) { t.Model, t.ToolCall = req.model, tool })
	rs := s.newResponder(w, r, x, req)
	rs.tool = tool
	x.run(rs)
	if rs.ended && (s.cfg.CloseAfter == CloseAfterAll || s.cfg.CloseAfter == CloseAfterStream && rs.stream) {
		rs.closeConn()
	}
}

// htmlPage is what a login-wall proxy answers in place of the API.
const htmlPage = `<!DOCTYPE html>
<html><head><title>Sign in</title></head>
<body><h1>Sign in to continue</h1><form method="post" action="/login"><input name="user"><input name="password" type="password"></form></body></html>
`
