// Package ollama holds the end-to-end tests against a real LLM server:
// Ollama (built from the Go module proxy by scripts/ollama.sh) serving a
// random-weight model written by internal/gguf, on loopback. They check
// tailgate's figures against Ollama's own, request by request, and the
// behaviours a real server showed (a runner killed mid-stream, its busy
// 503, no /metrics, the EOS it counts but never streams).
//
// Without the binary they skip, loudly, unless TAILGATE_REQUIRE_OLLAMA=1
// (CI), where they fail. They are timing tests: under the race detector
// they skip (make test runs them in its pass without it).
package ollama
