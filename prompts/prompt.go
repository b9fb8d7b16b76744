package prompts

import "time"

// Message is one chat message in OpenAI form.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Prompt is one request to send: what the protocol clients turn into a
// request body. The engine never looks inside beyond Class, At and the
// session fields.
type Prompt struct {
	ID    string `json:"id,omitempty"`
	Class string `json:"class,omitempty"`
	// Messages is the chat form; Text the completions form. A client given
	// only one of them derives the other.
	Messages []Message `json:"messages,omitempty"`
	Text     string    `json:"text,omitempty"`
	// MaxTokens caps the output; 0 leaves it to the client's default.
	MaxTokens int `json:"max_tokens,omitempty"`
	// InputTokens is the prompt length in tokens the source asked for or
	// counted (0: unknown); reported beside the server's count.
	InputTokens int `json:"input_tokens,omitempty"`
	// Params are extra body fields (temperature, top_p, ignore_eos, ...),
	// copied into the request as they are.
	Params map[string]any `json:"params,omitempty"`
	// Model is the model or LoRA adapter this prompt is sent to, in place
	// of the run's --model ("": the run's). Params["model"], which trace
	// sources set from a mix's models: table, means the same: ModelName
	// reads either.
	Model string `json:"model,omitempty"`
	// Headers are extra request headers (gRPC metadata), a tenant's
	// x-gateway-inference-fairness-id say. Values may be credentials: they
	// are sent, never logged.
	Headers map[string]string `json:"-"`
	// At is the arrival offset from the start of a replayed trace, already
	// time-scaled; only trace sources set it.
	At time.Duration `json:"at,omitempty"`
	// Session and Turn place a prompt in a multi-turn conversation.
	Session string `json:"session,omitempty"`
	Turn    int    `json:"turn,omitempty"`
	// Think is the pause after the previous turn's answer before this turn
	// is due; the engine sets this turn's intended start to that instant.
	Think time.Duration `json:"think,omitempty"`
	// FollowUp, when set, builds the session's next turn from this turn's
	// answer text (history included), or returns nil after the last turn.
	FollowUp func(answer string) *Prompt `json:"-"`
	// Graph, when set, makes this prompt a whole agent session: the engine
	// runs the graph's calls by their edges and sends none of this
	// prompt's own content. A source yields one such prompt per session,
	// with At (trace sources) or the schedule giving the session's start.
	Graph *Graph `json:"-"`
	// Call and After place a session call in its graph: its id and the
	// ids of the calls it waited for, as records carry them.
	Call  string   `json:"call,omitempty"`
	After []string `json:"after,omitempty"`
}

// Chat returns the prompt as chat messages, wrapping Text as one user
// message when the source gave only text.
func (p *Prompt) Chat() []Message {
	if len(p.Messages) > 0 || p.Text == "" {
		return p.Messages
	}
	return []Message{{Role: "user", Content: p.Text}}
}

// Completion returns the prompt as one text, joining chat message contents
// with newlines when the source gave only messages.
func (p *Prompt) Completion() string {
	if p.Text != "" || len(p.Messages) == 0 {
		return p.Text
	}
	n := 0
	for _, m := range p.Messages {
		n += len(m.Content) + 1
	}
	b := make([]byte, 0, n)
	for i, m := range p.Messages {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, m.Content...)
	}
	return string(b)
}

// ModelName is the model this prompt names: Model, else a string
// Params["model"], else "" (the run's model).
func (p *Prompt) ModelName() string {
	if p.Model != "" {
		return p.Model
	}
	if s, ok := p.Params["model"].(string); ok {
		return s
	}
	return ""
}
