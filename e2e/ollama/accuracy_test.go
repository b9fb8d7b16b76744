package ollama

import (
	"fmt"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/ollamatest"
	"github.com/tailgate-llm/tailgate/loadgen"
)

// TestOllamaAccuracy: both APIs, streamed and not, closed and open loop.
// Tiny answers run to max_tokens, so every answer has exactly that many
// tokens, one per streamed chunk, and the server's counts say so. On the
// native API every answer carries Ollama's own timings: paired request by
// request, tailgate's E2E is never below total_duration (it measures from
// before the send to after the last byte, the server from arrival to
// before the last write) and their median difference is a few
// milliseconds; TPOT agrees with eval_duration / eval_count.
func TestOllamaAccuracy(t *testing.T) {
	s := start(t, ollamatest.Options{NumParallel: 2})
	const tokens = 12
	closed := loadgen.Options{Stages: []loadgen.Stage{{Name: "c", Concurrency: 2, Duration: time.Minute}}, Closed: true, Requests: 6}
	open := loadgen.Options{Stages: []loadgen.Stage{{Name: "o", Rate: 3, Duration: 2 * time.Second}}, Arrival: loadgen.ArrivalConstant}
	for _, api := range []string{"ollama-chat", "openai-chat"} {
		for _, stream := range []bool{true, false} {
			for name, opts := range map[string]loadgen.Options{"closed": closed, "open": open} {
				t.Run(fmt.Sprintf("%s/stream=%v/%s", api, stream, name), func(t *testing.T) {
					recs := load(t, s, api, ollamatest.Tiny, stream, tokens, opts)
					if len(recs) < 4 {
						t.Fatalf("%d records", len(recs))
					}
					var e2eGap, tpotGap []float64
					for _, r := range recs {
						if r.ErrorKind != loadgen.ErrNone {
							t.Fatalf("request %d: %s %s", r.Seq, r.ErrorKind, r.Error)
						}
						wantChunks := tokens
						if !stream {
							wantChunks = 1
						}
						if r.OutputTokens != tokens || r.TokenSource != loadgen.TokensFromUsage || len(r.Chunks) != wantChunks || r.FinishReason != "length" {
							t.Fatalf("request %d: %d output tokens (%s) over %d chunks, finish %q: want %d from the server over %d",
								r.Seq, r.OutputTokens, r.TokenSource, len(r.Chunks), r.FinishReason, tokens, wantChunks)
						}
						if r.InputTokens == 0 {
							t.Errorf("request %d: no prompt tokens from the server", r.Seq)
						}
						if api != "ollama-chat" {
							if r.Server != nil {
								t.Errorf("request %d: server timings %+v on /v1, which gives none", r.Seq, r.Server)
							}
							continue
						}
						srv := r.Server
						if srv == nil || srv.Total == 0 || srv.Eval == 0 || srv.Prompt == 0 {
							t.Fatalf("request %d: server timings %+v", r.Seq, srv)
						}
						e2e := r.End - r.Intended
						if e2e < srv.Total {
							t.Errorf("request %d: E2E %v below the server's total_duration %v", r.Seq, e2e, srv.Total)
						}
						e2eGap = append(e2eGap, ms(e2e-srv.Total))
						if q, ok := srv.Queue(); !ok || q > srv.Total {
							t.Errorf("request %d: queue %v %v of total %v", r.Seq, q, ok, srv.Total)
						}
						if stream {
							tpot := ms(r.End-r.Chunks[0].At) / float64(tokens-1)
							tpotGap = append(tpotGap, tpot-ms(srv.Eval)/float64(tokens))
						}
					}
					if api != "ollama-chat" {
						return
					}
					// A few ms on an idle machine (1.9 ms seen); 25 ms leaves room
					// for a loaded CI box without hiding a missed start or end,
					// which would be a whole decode step (tens of ms) or more.
					if m := median(e2eGap); m > 25 {
						t.Errorf("median E2E − total_duration = %.1f ms over %d requests, want ≤ 25: %v", m, len(e2eGap), e2eGap)
					}
					if len(tpotGap) > 0 {
						m := median(tpotGap)
						perToken := 0.0
						for _, r := range recs {
							perToken += ms(r.Server.Eval) / float64(tokens) / float64(len(recs))
						}
						// TPOT leaves out the first token, which eval_duration
						// holds, and eval_duration leaves out the scheduling and
						// writes between tokens, which grow on a loaded CPU: agree
						// within 2 ms and a quarter of a token.
						if m < -2-0.25*perToken || m > 2+0.25*perToken {
							t.Errorf("median TPOT − eval_duration/eval_count = %.2f ms (server %.2f ms/token): %v", m, perToken, tpotGap)
						}
					}
					t.Logf("%d requests; E2E − total_duration median %.2f ms %v; TPOT − eval rate median %.2f ms %v; server eval %v/token", len(recs), median(e2eGap), e2eGap, median(tpotGap), tpotGap, recs[0].Server.Eval/tokens)
				})
			}
		}
	}
}
