package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

func ExampleClient_Do() {
	// A stand-in server: a role chunk, one token, the finish, usage, [DONE].
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}`+"\n\n"+
			`data: {"choices":[{"delta":{"content":"Hello"}}]}`+"\n\n"+
			`data: {"choices":[{"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	defer srv.Close()

	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m", MaxTokens: 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec := loadgen.NewRecord(time.Now())
	c.Do(ctx, &prompts.Prompt{Text: "Say hello"}, rec)
	rec.Finalize() // the runner does this once for every record

	fmt.Println("ok:", rec.OK(), "chunks:", len(rec.Chunks), "finish:", rec.FinishReason)
	fmt.Println("tokens in/out:", rec.InputTokens, rec.OutputTokens, "from", rec.TokenSource)
	fmt.Println("first answer is first token:", rec.FirstAnswer == rec.FirstToken())
	// Output:
	// ok: true chunks: 1 finish: stop
	// tokens in/out: 9 1 from usage
	// first answer is first token: true
}
