package sim_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/sim"
)

// A fixed-delay simulator for an accuracy test: every request gets its
// first token 50 ms after arrival and the next ones 10 ms apart.
func ExampleStart() {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT = 50 * time.Millisecond
	cfg.FixedITL = 10 * time.Millisecond
	srv, err := sim.Start(cfg, "") // a free port on 127.0.0.1
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/v1/completions",
		strings.NewReader(`{"prompt": "Say three words.", "max_tokens": 3}`))
	req.Header.Set("X-Request-Id", "example-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"text":" the of and"`))

	// A non-streaming request sends no chunks; its truth still has the
	// timeline. (Streams get one TruthChunk per content chunk.)
	for _, t := range srv.Truth() {
		fmt.Println(t.ID, t.PromptTokens, t.OutputTokens, t.E2E() >= 70*time.Millisecond)
	}
	// Output:
	// 200 true
	// example-1 4 3 true
}
