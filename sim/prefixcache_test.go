package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// words is n single-token words of the default vocabulary from the
// offset, each with its leading space: a text of exactly n tokens.
func words(t testing.TB, from, n int) string {
	t.Helper()
	tok, err := prompts.NewTokenizer(prompts.DefaultEncoding)
	if err != nil {
		t.Fatal(err)
	}
	ws := tok.Words()
	var b strings.Builder
	for i := range n {
		b.WriteString(" " + ws[(from+i)%len(ws)])
	}
	return b.String()
}

func hashes(seed uint64, size int, text string, n int) []uint64 {
	b := newBlockHasher(seed, size, n)
	b.text(text)
	return b.done()
}

func TestPrefixCacheHits(t *testing.T) {
	const bs = 16
	a := " " + strings.Repeat("alpha ", 40) // 40 words
	shared := hashes(1, bs, a+" tail words here", 43)
	first := hashes(1, bs, a, 40)
	if len(first) != 2 || len(shared) != 2 || first[0] != shared[0] || first[1] != shared[1] {
		t.Fatalf("blocks %x and %x: want the same 2 leading blocks", first, shared)
	}
	// The same words after a different first block hash apart: chained.
	other := hashes(1, bs, " beta"+a[len(" alpha"):], 40)
	if other[1] == first[1] {
		t.Error("block 1 after a different block 0 hashed the same: the chain is not in the hash")
	}
	if s := hashes(2, bs, a, 40); s[0] == first[0] {
		t.Error("another seed (model) hashed block 0 the same")
	}

	c := newPrefixCache(100, bs)
	if hit := c.admit(first, 40); hit != 0 {
		t.Errorf("cold cache hit %d tokens, want 0", hit)
	}
	if hit := c.admit(shared, 43); hit != 32 {
		t.Errorf("shared prefix hit %d tokens, want 32", hit)
	}
	// A prompt that is all cached still computes its last token, so the
	// block holding it is not a hit (vLLM's num_tokens − 1).
	whole := hashes(1, bs, a[:len(a)-len("alpha ")], 32) // 32 tokens = 2 blocks
	c.admit(whole, 32)
	if hit := c.hits(whole, 32); hit != 16 {
		t.Errorf("a fully cached 32-token prompt hits %d, want 16", hit)
	}
	if hit := c.hits(other, 40); hit != 0 {
		t.Errorf("another first block hits %d, want 0", hit)
	}

	// LRU: room for 2 blocks; a third prompt's blocks evict the oldest.
	small := newPrefixCache(2, bs)
	small.admit(first, 40)
	small.admit(other, 40)
	if small.len() != 2 {
		t.Fatalf("cache holds %d blocks, want 2", small.len())
	}
	if hit := small.hits(first, 40); hit != 0 {
		t.Errorf("evicted prompt hits %d, want 0", hit)
	}
	if hit := small.hits(other, 40); hit != 32 {
		t.Errorf("most recent prompt hits %d, want 32", hit)
	}
}

// Cached blocks cost no prefill: on the fake clock, a repeated 1600-token
// prompt's first token comes PrefillPerToken × the 1584 cached tokens
// sooner, exactly.
func TestPrefixCachePrefillTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Mode = ModeBatch
		cfg.PrefillBase, cfg.PrefillPerToken = time.Millisecond, 100*time.Microsecond
		cfg.DecodeBase, cfg.DecodePerSeq = 4*time.Millisecond, 0
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		const n = 1600
		blocks := hashes(7, cfg.BlockSize, strings.Repeat(" word", n), n)
		ttft := func() (time.Duration, int) {
			arrived := time.Now()
			var first time.Duration
			hit := -1
			ok := s.runOnEngine(context.Background(), engineJob{prompt: n, max: 2, arrived: arrived, blocks: blocks, hit: &hit},
				func(int) {}, func(time.Time) {}, func(avail int) bool {
					if avail > 0 && first == 0 {
						first = time.Since(arrived)
					}
					return true
				})
			if !ok {
				t.Fatal("request did not finish")
			}
			return first, hit
		}
		cold, hit0 := ttft()
		warm, hit1 := ttft()
		if hit0 != 0 || hit1 != 1584 {
			t.Errorf("hits %d then %d, want 0 then 1584", hit0, hit1)
		}
		if want := 5*time.Millisecond + n*100*time.Microsecond; cold != want {
			t.Errorf("cold TTFT %v, want %v", cold, want)
		}
		if want := 5*time.Millisecond + (n-1584)*100*time.Microsecond; warm != want {
			t.Errorf("warm TTFT %v, want %v", warm, want)
		}
	})
}

// On the wire: usage cached_tokens, the truth and vLLM's two counters
// (in tokens) agree; with the cache off there is none of them.
func TestPrefixCacheWire(t *testing.T) {
	cfg := fastBatch()
	r := startSim(t, cfg)
	c := testClient(t)
	ctx := context.Background()
	base := words(t, 0, 64)
	type usage struct {
		PromptTokens int `json:"prompt_tokens"`
		Details      *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	send := func(id, content string, stream bool) usage {
		res := do(ctx, c, r.URL, "/v1/chat/completions", chatBody(content, 4, stream, true), map[string]string{"X-Request-Id": id})
		if res.err != nil || res.status != http.StatusOK {
			t.Fatalf("%s: status %d err %v", id, res.status, res.err)
		}
		var u struct{ Usage *usage }
		if stream {
			for _, e := range res.events {
				if strings.Contains(e.data, `"usage"`) {
					json.Unmarshal([]byte(e.data), &u)
				}
			}
		} else {
			json.Unmarshal(res.body, &u)
		}
		if u.Usage == nil || u.Usage.Details == nil {
			t.Fatalf("%s: no usage prompt_tokens_details", id)
		}
		return *u.Usage
	}
	u1 := send("a", base, true)
	u2 := send("b", base+words(t, 100, 36), false)
	if u1.PromptTokens != 64 || u1.Details.CachedTokens != 0 {
		t.Errorf("first: prompt %d cached %d, want 64 and 0", u1.PromptTokens, u1.Details.CachedTokens)
	}
	if u2.PromptTokens != 100 || u2.Details.CachedTokens != 64 {
		t.Errorf("second: prompt %d cached %d, want 100 and 64", u2.PromptTokens, u2.Details.CachedTokens)
	}
	waitIdle(t, r.Server)
	if tr := truthByID(t, r.Server, "b"); tr.CachedTokens != 64 {
		t.Errorf("truth cached %d, want 64", tr.CachedTokens)
	}
	m := scrape(t, c, r.URL)
	q, okQ := metricValue(t, m, "vllm:prefix_cache_queries_total", `engine="0"`)
	h, okH := metricValue(t, m, "vllm:prefix_cache_hits_total", `engine="0"`)
	if !okQ || !okH || q != 164 || h != 64 {
		t.Errorf("counters queries %v (%v) hits %v (%v), want 164 and 64", q, okQ, h, okH)
	}

	off := fastBatch()
	off.PrefixCacheBlocks = -1
	r2 := startSim(t, off)
	res := do(ctx, c, r2.URL, "/v1/chat/completions", chatBody(base, 4, false, false), nil)
	if strings.Contains(string(res.body), "prompt_tokens_details") {
		t.Errorf("cache off: usage has prompt_tokens_details: %s", res.body)
	}
	if m := scrape(t, c, r2.URL); strings.Contains(m, "prefix_cache") {
		t.Error("cache off: /metrics has prefix-cache series (a series not measured must be absent)")
	}
}
