package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startSim serves cfg on loopback for the test's lifetime.
func startSim(t testing.TB, cfg Config) *Running {
	t.Helper()
	r, err := Start(cfg, "")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// testClient returns a client with its own transport, closed at cleanup.
func testClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// event is one SSE data field as the client read it.
type event struct {
	at   time.Time
	data string
}

// result is a completed (or failed) request as the client saw it.
type result struct {
	sent    time.Time
	status  int
	header  http.Header
	events  []event
	body    []byte // non-streaming responses
	readErr error  // error reading the body (truncation)
	err     error  // error before a response
}

// chatBody builds a chat request body.
func chatBody(content string, maxTokens int, stream, usage bool) map[string]any {
	b := map[string]any{
		"model":      "m",
		"messages":   []map[string]string{{"role": "user", "content": content}},
		"max_tokens": maxTokens,
		"stream":     stream,
	}
	if usage {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

// do posts body to url+path and reads the whole response, timing each SSE
// event as its data line completes.
func do(ctx context.Context, c *http.Client, url, path string, body any, hdr map[string]string) result {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res := result{sent: time.Now()}
	resp, err := c.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	res.status, res.header = resp.StatusCode, resp.Header
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		res.body, res.readErr = io.ReadAll(resp.Body)
		return res
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if !errors.Is(err, io.EOF) {
				res.readErr = err // e.g. io.ErrUnexpectedEOF: the body was cut
			}
			return res
		}
		line = strings.TrimRight(line, "\r\n")
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			res.events = append(res.events, event{time.Now(), strings.TrimPrefix(d, " ")})
		}
	}
}

// chunkJSON is the part of a stream chunk the tests read.
type chunkJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func parseChunk(t testing.TB, data string) chunkJSON {
	t.Helper()
	var c chunkJSON
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("chunk %q: %v", data, err)
	}
	return c
}

// contentText is a chunk's text (chat delta content or completions text).
func (c chunkJSON) contentText() string {
	if len(c.Choices) == 0 {
		return ""
	}
	if c.Choices[0].Delta.Content != nil {
		return *c.Choices[0].Delta.Content
	}
	if c.Choices[0].Text != nil {
		return *c.Choices[0].Text
	}
	return ""
}

// contentEvents returns the events that carry text, with their times.
func contentEvents(t testing.TB, evs []event) []event {
	t.Helper()
	var out []event
	for _, e := range evs {
		if e.data == "[DONE]" || !json.Valid([]byte(e.data)) {
			continue
		}
		if parseChunk(t, e.data).contentText() != "" {
			out = append(out, e)
		}
	}
	return out
}

// metricValue finds `name{...labelSubstr...} value` in a text exposition.
func metricValue(t testing.TB, text, name, labelSubstr string) (float64, bool) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if labelSubstr != "" && !strings.Contains(line, labelSubstr) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v, true
	}
	return 0, false
}

func scrape(t testing.TB, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitIdle(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle: %v (in flight %d)", err, s.InFlight())
	}
}

func truthByID(t testing.TB, s *Server, id string) Truth {
	t.Helper()
	for _, tr := range s.Truth() {
		if tr.ID == id {
			return tr
		}
	}
	t.Fatalf("no truth for %q", id)
	return Truth{}
}

// fastBatch is a small, quick engine for tests.
func fastBatch() Config {
	c := DefaultConfig()
	c.Slots = 8
	c.PrefillBase = time.Millisecond
	c.PrefillPerToken = 0
	c.DecodeBase = 2 * time.Millisecond
	c.DecodePerSeq = 0
	return c
}

func fixedCfg(ttft, itl time.Duration) Config {
	c := DefaultConfig()
	c.Mode = ModeFixed
	c.FixedTTFT, c.FixedITL = ttft, itl
	return c
}

// doSignal streams a chat request with id and maxTokens, closing first when
// the first content chunk arrives; the body is read until ctx ends or the
// stream does.
func doSignal(ctx context.Context, c *http.Client, url, id string, maxTokens int, first chan<- struct{}) result {
	raw, _ := json.Marshal(chatBody("x", maxTokens, true, false))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(raw))
	req.Header.Set("X-Request-Id", id)
	res := result{sent: time.Now()}
	resp, err := c.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	res.status = resp.StatusCode
	br := bufio.NewReader(resp.Body)
	signalled := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			res.readErr = err
			return res
		}
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
			res.events = append(res.events, event{time.Now(), d})
			if !signalled && strings.Contains(d, `"content":" `) {
				signalled = true
				close(first)
			}
		}
	}
}

// testClientNoCleanup is testClient for tests that check goroutines
// themselves; call CloseIdleConnections.
func testClientNoCleanup() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
}
