package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestChatStreamShape(t *testing.T) {
	for _, mode := range []Mode{ModeBatch, ModeFixed} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := fastBatch()
			cfg.Mode = mode
			cfg.TokensPerChunk = 2
			cfg.Model = "shape-model"
			cfg.Tokenizer = TokenizerBytes4
			r := startSim(t, cfg)
			c := testClient(t)
			prompt := strings.Repeat("x", 37) // 10 tokens at 4 bytes/token
			res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody(prompt, 5, true, true),
				map[string]string{"X-Request-Id": "req-1"})
			if res.err != nil || res.readErr != nil || res.status != 200 {
				t.Fatalf("status %d err %v readErr %v", res.status, res.err, res.readErr)
			}
			if ct := res.header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			if v := res.header.Get("X-Sim-Version"); v != Version {
				t.Errorf("X-Sim-Version %q", v)
			}
			if v := res.header.Get("Server"); !strings.HasPrefix(v, "tailgate-sim/") {
				t.Errorf("Server %q", v)
			}
			if v := res.header.Get("X-Request-Id"); v != "req-1" {
				t.Errorf("X-Request-Id %q", v)
			}
			ev := res.events
			if len(ev) != 7 {
				t.Fatalf("got %d events, want role + 3 content + finish + usage + [DONE]:\n%v", len(ev), ev)
			}
			role := parseChunk(t, ev[0].data)
			if role.Object != "chat.completion.chunk" || role.ID != "chatcmpl-req-1" || role.Model != "shape-model" {
				t.Errorf("role chunk header: %+v", role)
			}
			if d := role.Choices[0].Delta; d.Role == nil || *d.Role != "assistant" || d.Content == nil || *d.Content != "" {
				t.Errorf("first chunk is not role-only: %s", ev[0].data)
			}
			wantText := []string{" the of", " and to", " in"}
			for i, w := range wantText {
				ch := parseChunk(t, ev[1+i].data)
				if got := ch.contentText(); got != w {
					t.Errorf("content chunk %d text %q, want %q", i, got, w)
				}
				if ch.Choices[0].FinishReason != nil {
					t.Errorf("content chunk %d has finish_reason %q", i, *ch.Choices[0].FinishReason)
				}
				if ch.Usage != nil {
					t.Errorf("content chunk %d has usage without continuous_usage_stats", i)
				}
			}
			fin := parseChunk(t, ev[4].data)
			if fr := fin.Choices[0].FinishReason; fr == nil || *fr != "length" || fin.contentText() != "" {
				t.Errorf("finish chunk: %s", ev[4].data)
			}
			u := parseChunk(t, ev[5].data)
			if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 10 || u.Usage.CompletionTokens != 5 || u.Usage.TotalTokens != 15 {
				t.Errorf("usage chunk: %s", ev[5].data)
			}
			if !strings.Contains(ev[5].data, `"choices":[]`) {
				t.Errorf("usage chunk choices not an empty array: %s", ev[5].data)
			}
			if ev[6].data != "[DONE]" {
				t.Errorf("last event %q", ev[6].data)
			}
			waitIdle(t, r.Server)
			tr := truthByID(t, r.Server, "req-1")
			if tr.OutputTokens != 5 || len(tr.Chunks) != 3 || tr.PromptTokens != 10 || tr.Outcome != "ok" || tr.Status != 200 {
				t.Errorf("truth %+v", tr)
			}
			if tr.Chunks[0].Tokens != 2 || tr.Chunks[2].Tokens != 1 {
				t.Errorf("truth chunk tokens %+v", tr.Chunks)
			}
			if tr.Admitted.IsZero() || tr.Headers.IsZero() || tr.End.Before(tr.Chunks[2].At) || tr.Headers.Before(tr.Arrived) {
				t.Errorf("truth instants out of order: %+v", tr)
			}
		})
	}
}

func TestCompletionsStreamNoUsage(t *testing.T) {
	r := startSim(t, fastBatch())
	c := testClient(t)
	body := map[string]any{"model": "m", "prompt": "abcdefgh", "max_tokens": 3, "stream": true}
	res := do(context.Background(), c, r.URL, "/v1/completions", body, nil)
	if res.status != 200 || res.readErr != nil {
		t.Fatalf("status %d readErr %v", res.status, res.readErr)
	}
	if len(res.events) != 5 {
		t.Fatalf("got %d events, want 3 content + finish + [DONE]: %v", len(res.events), res.events)
	}
	var text string
	for i, e := range res.events[:3] {
		ch := parseChunk(t, e.data)
		if ch.Object != "text_completion" || !strings.HasPrefix(ch.ID, "cmpl-sim-") {
			t.Errorf("chunk %d: %s", i, e.data)
		}
		text += ch.contentText()
	}
	if text != " the of and" {
		t.Errorf("text %q", text)
	}
	if fr := parseChunk(t, res.events[3].data).Choices[0].FinishReason; fr == nil || *fr != "length" {
		t.Errorf("finish chunk %s", res.events[3].data)
	}
	if res.events[4].data != "[DONE]" {
		t.Errorf("last %q", res.events[4].data)
	}
}

func TestContinuousUsageAndFinishWithLastChunk(t *testing.T) {
	cfg := fastBatch()
	cfg.FinishWithLastChunk = true
	r := startSim(t, cfg)
	c := testClient(t)
	body := chatBody("abcd", 3, true, true)
	body["stream_options"] = map[string]any{"include_usage": true, "continuous_usage_stats": true}
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", body, nil)
	// role, 3 content (the last with finish_reason), usage, [DONE]
	if len(res.events) != 6 {
		t.Fatalf("events %v", res.events)
	}
	for i := 1; i <= 3; i++ {
		ch := parseChunk(t, res.events[i].data)
		if ch.Usage == nil || ch.Usage.CompletionTokens != i || ch.Usage.PromptTokens != 1 {
			t.Errorf("chunk %d usage: %s", i, res.events[i].data)
		}
		fr := ch.Choices[0].FinishReason
		if (i == 3) != (fr != nil) {
			t.Errorf("chunk %d finish_reason: %s", i, res.events[i].data)
		}
	}
	if u := parseChunk(t, res.events[4].data); len(u.Choices) != 0 || u.Usage.CompletionTokens != 3 {
		t.Errorf("usage chunk %s", res.events[4].data)
	}
}

func TestNonStreaming(t *testing.T) {
	r := startSim(t, fastBatch())
	c := testClient(t)
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hello world!", 4, false, false), nil)
	if res.status != 200 || res.readErr != nil {
		t.Fatalf("status %d %v", res.status, res.readErr)
	}
	var chat struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(res.body, &chat); err != nil {
		t.Fatalf("%v: %s", err, res.body)
	}
	if chat.Object != "chat.completion" || chat.Choices[0].Message.Role != "assistant" ||
		chat.Choices[0].Message.Content != " the of and to" || chat.Choices[0].FinishReason != "length" ||
		chat.Usage.PromptTokens != 3 || chat.Usage.CompletionTokens != 4 || chat.Usage.TotalTokens != 7 {
		t.Errorf("chat response %s", res.body)
	}

	res = do(context.Background(), c, r.URL, "/v1/completions",
		map[string]any{"prompt": []int{1, 2, 3, 4, 5}, "max_completion_tokens": 2}, nil)
	var compl struct {
		Object  string `json:"object"`
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(res.body, &compl); err != nil {
		t.Fatalf("%v: %s", err, res.body)
	}
	if compl.Object != "text_completion" || compl.Choices[0].Text != " the of" || compl.Usage.PromptTokens != 5 || compl.Usage.CompletionTokens != 2 {
		t.Errorf("completions response %s", res.body)
	}
}

func TestModelsHealth(t *testing.T) {
	cfg := fastBatch()
	cfg.Model = "my/model"
	r := startSim(t, cfg)
	c := testClient(t)
	resp, err := c.Get(r.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health %v %v", resp, err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Sim-Version") == "" {
		t.Error("no X-Sim-Version on /health")
	}
	resp, err = c.Get(r.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil {
		t.Fatal(err)
	}
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "my/model" || models.Data[0].Object != "model" {
		t.Errorf("models %+v", models)
	}
}

func TestBadRequests(t *testing.T) {
	cfg := fastBatch()
	cfg.KVTokens = 100
	cfg.StrictModel = true
	cfg.Model = "m"
	r := startSim(t, cfg)
	c := testClient(t)
	cases := []struct {
		name   string
		path   string
		body   any
		hdr    map[string]string
		status int
	}{
		{"not json", "/v1/chat/completions", "nope", nil, 400},
		{"no messages", "/v1/chat/completions", map[string]any{"model": "m"}, nil, 400},
		{"max_tokens 0", "/v1/chat/completions", chatBody("x", 0, true, false), nil, 400},
		{"too long for KV", "/v1/chat/completions", chatBody("x", 100, true, false), nil, 400},
		{"n=2", "/v1/completions", map[string]any{"prompt": "x", "n": 2}, nil, 400},
		{"two prompts", "/v1/completions", map[string]any{"prompt": []string{"a", "b"}}, nil, 400},
		{"unknown model", "/v1/chat/completions", map[string]any{"model": "other", "messages": []map[string]string{{"role": "user", "content": "x"}}}, nil, 404},
		{"unknown fault", "/v1/chat/completions", chatBody("x", 1, true, false), map[string]string{"X-Sim-Fault": "explode"}, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := do(context.Background(), c, r.URL, tc.path, tc.body, tc.hdr)
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(res.body, &e); err != nil || e.Error.Code != tc.status || e.Error.Message == "" {
				t.Errorf("error body %s", res.body)
			}
		})
	}
	// Parts-array content is accepted.
	body := map[string]any{"model": "m", "max_tokens": 1, "messages": []map[string]any{
		{"role": "user", "content": []map[string]string{{"type": "text", "text": "abcdefgh"}}}}}
	if res := do(context.Background(), c, r.URL, "/v1/chat/completions", body, nil); res.status != 200 {
		t.Errorf("parts content: status %d %s", res.status, res.body)
	}
}

func TestTokenCounter(t *testing.T) {
	cfg := fastBatch()
	cfg.TokenCounter = func(s string) int { return len(strings.Fields(s)) }
	r := startSim(t, cfg)
	c := testClient(t)
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("one two three", 1, false, false), nil)
	if !strings.Contains(string(res.body), `"prompt_tokens":3,`) {
		t.Errorf("body %s", res.body)
	}
}

func TestParseFaultRule(t *testing.T) {
	good := map[string]FaultRule{
		"truncate=0.05":     {Kind: FaultTruncate, Rate: 0.05},
		"http_429=1/20":     {Kind: FaultHTTP429, Every: 20},
		" hang = 1 ":        {Kind: FaultHang, Rate: 1},
		"stall_mid=1/1":     {Kind: FaultStallMid, Every: 1},
		"malformed=0":       {Kind: FaultMalformed},
		"http_503=0.5":      {Kind: FaultHTTP503, Rate: 0.5},
		"stall=1/3":         {Kind: FaultStall, Every: 3},
		"error_in_stream=1": {Kind: FaultErrorInStream, Rate: 1},
	}
	for in, want := range good {
		got, err := ParseFaultRule(in)
		if err != nil || got != want {
			t.Errorf("ParseFaultRule(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"truncate", "boom=0.1", "stall=1.5", "stall=-0.1", "stall=2/3", "stall=1/0", "stall=x"} {
		if _, err := ParseFaultRule(in); err == nil {
			t.Errorf("ParseFaultRule(%q): no error", in)
		}
	}
}

func TestFaultRulesDeterministic(t *testing.T) {
	rules := []FaultRule{{Kind: FaultHTTP429, Every: 4}, {Kind: FaultHTTP503, Rate: 0.3}}
	pick := func(seed uint64) []FaultKind {
		out := make([]FaultKind, 1000)
		for i := range out {
			out[i] = pickFault(rules, seed, int64(i+1))
		}
		return out
	}
	a, b, other := pick(7), pick(7), pick(8)
	n503, same := 0, 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 not reproducible at %d", i)
		}
		if (i+1)%4 == 0 && a[i] != FaultHTTP429 {
			t.Errorf("request %d: %q, want http_429", i+1, a[i])
		}
		if a[i] == FaultHTTP503 {
			n503++
		}
		if a[i] == other[i] {
			same++
		}
	}
	// 750 eligible requests × 0.3
	if n503 < 180 || n503 > 270 {
		t.Errorf("%d http_503 of 750 at rate 0.3", n503)
	}
	if same == len(a) {
		t.Error("seed does not matter")
	}

	// Through the server: every 3rd request 429, header "none" overrides.
	cfg := fastBatch()
	cfg.Faults = []FaultRule{{Kind: FaultHTTP429, Every: 3}}
	r := startSim(t, cfg)
	c := testClient(t)
	var statuses []int
	for i := 0; i < 6; i++ {
		hdr := map[string]string{}
		if i == 5 {
			hdr["X-Sim-Fault"] = "none"
		}
		statuses = append(statuses, do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("x", 1, true, false), hdr).status)
	}
	want := []int{200, 200, 429, 200, 200, 200}
	for i := range want {
		if statuses[i] != want[i] {
			t.Fatalf("statuses %v, want %v", statuses, want)
		}
	}
	if err := r.SetFaults([]FaultRule{{Kind: FaultHTTP503, Every: 1}}); err != nil {
		t.Fatal(err)
	}
	if st := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("x", 1, true, false), nil).status; st != 503 {
		t.Errorf("after SetFaults: %d", st)
	}
	if err := r.SetFaults([]FaultRule{{Kind: "nope"}}); err == nil {
		t.Error("SetFaults accepted an unknown kind")
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Slots = -1 },
		func(c *Config) { c.DecodeBase = -time.Millisecond },
		func(c *Config) { c.Mode = "turbo" },
		func(c *Config) { c.Faults = []FaultRule{{Kind: FaultStall, Rate: 2}} },
		func(c *Config) { c.TruthLimit = -2 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if s, err := New(c); err == nil {
			s.Close()
			t.Errorf("case %d: no error", i)
		}
	}
	s, err := New(Config{FixedITL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Config(); got.Mode != ModeFixed || got.Slots != 64 || got.Model == "" {
		t.Errorf("defaults not filled: %+v", got)
	}
}

func TestTextTable(t *testing.T) {
	for _, tpc := range []int{1, 3, 16, 40} {
		tt := newTextTable(tpc)
		var b strings.Builder
		const total = 101
		for sent := 0; sent < total; sent += tpc {
			b.Write(tt.text(sent, min(tpc, total-sent)))
		}
		if got, want := b.String(), string(answerText(total)); got != want {
			t.Errorf("tpc %d: chunks join to %q, want %q", tpc, got, want)
		}
	}
	if got := string(appendJSONString(nil, "a\"b\\c\n<")); got != `"a\"b\\c\u000a\u003c"` {
		t.Errorf("appendJSONString: %s", got)
	}
}

func TestStatusAndRetryAfter(t *testing.T) {
	r := startSim(t, fastBatch())
	c := testClient(t)
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("x", 1, true, false), map[string]string{"X-Sim-Fault": "http_429"})
	if res.status != http.StatusTooManyRequests || res.header.Get("Retry-After") != "1" {
		t.Errorf("429: status %d Retry-After %q", res.status, res.header.Get("Retry-After"))
	}
}

// LoRA adapters are listed after the base model with it as their parent,
// a request naming one is served and its truth names it, and a name
// neither base nor adapter gets vLLM's 404.
func TestAdapters(t *testing.T) {
	cfg := fastBatch()
	cfg.Model, cfg.Adapters = "base", []string{"lora-a", "lora-b"}
	r := startSim(t, cfg)
	c := testClient(t)
	resp, err := c.Get(r.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range models.Data {
		p := ""
		if m.Parent != nil {
			p = *m.Parent
		}
		listed = append(listed, m.ID+"<"+p)
	}
	if got := strings.Join(listed, " "); got != "base< lora-a<base lora-b<base" {
		t.Errorf("listed %s", got)
	}
	msgs := []map[string]string{{"role": "user", "content": "x"}}
	if res := do(context.Background(), c, r.URL, "/v1/chat/completions", map[string]any{"model": "lora-b", "max_tokens": 1, "messages": msgs}, nil); res.status != 200 {
		t.Fatalf("lora-b: status %d %s", res.status, res.body)
	}
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", map[string]any{"model": "lora-z", "max_tokens": 1, "messages": msgs}, nil)
	if res.status != 404 || !strings.Contains(string(res.body), "The model `lora-z` does not exist.") {
		t.Fatalf("lora-z: status %d %s", res.status, res.body)
	}
	tr := r.Truth()
	if len(tr) != 2 || tr[0].Model != "lora-b" || tr[0].Status != 200 || tr[1].Status != 404 {
		t.Fatalf("truth %+v", tr)
	}
}
