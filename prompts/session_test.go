package prompts

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// followSession plays a whole session with canned answers, returning its
// turns in order.
func followSession(p *Prompt) []*Prompt {
	turns := []*Prompt{p}
	for p.FollowUp != nil {
		p = p.FollowUp(fmt.Sprintf("answer to %s", p.ID))
		turns = append(turns, p)
	}
	return turns
}

// Multi-turn requests carry the full history: the system messages, every
// earlier user turn and the answer the server gave to it, then the new
// turn.
func TestSessionCarriesFullHistory(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
classes:
  - name: conv
    source: {type: sharegpt, path: s.json}
    sessions: {think_time: 1500ms}
    max_tokens: 50
`, map[string]string{"s.json": `[{"conversations": [
	{"from": "system", "value": "Be kind."},
	{"from": "human", "value": "one"}, {"from": "gpt", "value": "ref one"},
	{"from": "human", "value": "two"}, {"from": "gpt", "value": "ref two"},
	{"from": "human", "value": "three"}]}]`})
	tok := m.Tokenizer()
	turns := followSession(next(t, m.Source(1)))
	if len(turns) != 3 {
		t.Fatalf("%d turns, want 3", len(turns))
	}
	want := []Message{{Role: "system", Content: "Be kind."}}
	for k, p := range turns {
		want = append(want, Message{Role: "user", Content: []string{"one", "two", "three"}[k]})
		if !reflect.DeepEqual(p.Messages, want) {
			t.Fatalf("turn %d messages:\n%v\nwant\n%v", k, p.Messages, want)
		}
		if p.Turn != k || p.Session != "conv-0" || p.ID != fmt.Sprintf("conv-0-t%d", k) || p.Class != "conv" || p.MaxTokens != 50 {
			t.Errorf("turn %d: %+v", k, p)
		}
		wantThink := 1500 * time.Millisecond
		if k == 0 {
			wantThink = 0
		}
		if p.Think != wantThink {
			t.Errorf("turn %d: think %v, want %v", k, p.Think, wantThink)
		}
		n := 0
		for _, msg := range p.Messages {
			n += tok.Count(msg.Content)
		}
		if p.InputTokens != n {
			t.Errorf("turn %d: InputTokens %d, contents have %d", k, p.InputTokens, n)
		}
		want = append(want, Message{Role: "assistant", Content: "answer to " + p.ID})
	}
	if turns[2].FollowUp != nil {
		t.Error("the last turn has a FollowUp")
	}
	// FollowUp does not change the turn it was called on.
	if len(turns[0].Messages) != 2 {
		t.Error("FollowUp modified the earlier turn")
	}
}

// Without a class max_tokens, each turn's output length is its reference
// answer's.
func TestSessionReferenceLengths(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
classes:
  - name: c
    source: {type: jsonl, path: c.jsonl}
    sessions: {max_turns: 2}
`, map[string]string{"c.jsonl": `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "one two three"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "four five"}, {"role": "user", "content": "c"}]}`})
	turns := followSession(next(t, m.Source(1)))
	if len(turns) != 2 || turns[0].MaxTokens != 3 || turns[1].MaxTokens != 2 {
		t.Errorf("turns %d, max_tokens %d %d", len(turns), turns[0].MaxTokens, turns[1].MaxTokens)
	}
}

// Synthetic sessions: turns drawn from the distribution, each user turn of
// its drawn length, and the shared prefix as the system message.
func TestSyntheticSessions(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
classes:
  - name: agent
    source:
      type: synthetic
      input_tokens: {dist: uniform, min: 5, max: 40}
      shared_prefix: {tokens: 30, prompts_per_prefix: 2}
    sessions:
      turns: {dist: uniform, min: 2, max: 4}
      think_time: {dist: uniform, min: 1s, max: 2s}
`, nil)
	tok := m.Tokenizer()
	src := m.Source(9)
	lengths := map[int]int{}
	for s := 0; s < 40; s++ {
		turns := followSession(next(t, src))
		lengths[len(turns)]++
		for k, p := range turns {
			if len(p.Messages) != 2*k+2 || p.Messages[0].Role != "system" || tok.Count(p.Messages[0].Content) != 30 {
				t.Fatalf("session %d turn %d: %d messages", s, k, len(p.Messages))
			}
			if k > 0 && (p.Think < time.Second || p.Think > 2*time.Second) {
				t.Errorf("think %v", p.Think)
			}
			n := 0
			for _, msg := range p.Messages {
				n += tok.Count(msg.Content)
			}
			if p.InputTokens != n {
				t.Errorf("InputTokens %d, contents %d", p.InputTokens, n)
			}
		}
	}
	if len(lengths) != 3 || lengths[1] != 0 || lengths[5] != 0 {
		t.Errorf("session lengths %v, want 2, 3 and 4 turns", lengths)
	}
}

// Follow-ups may be built on any goroutine, in any order, and give the
// same prompts: they consume no shared state (run with -race).
func TestFollowUpConcurrent(t *testing.T) {
	t.Parallel()
	m, err := LoadMix("../testdata/mixes/sessions.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serial := func() [][]*Prompt {
		src := m.Source(4)
		var all [][]*Prompt
		for i := 0; i < 30; i++ {
			all = append(all, followSession(next(t, src)))
		}
		return all
	}
	want := serial()
	src := m.Source(4)
	got := make([][]*Prompt, 30)
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		first := next(t, src)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = followSession(first)
		}()
		// Keep drawing while the follow-ups run.
	}
	wg.Wait()
	for i := range want {
		if len(want[i]) != len(got[i]) {
			t.Fatalf("session %d: %d turns vs %d", i, len(want[i]), len(got[i]))
		}
		for k := range want[i] {
			a, b := *want[i][k], *got[i][k]
			a.FollowUp, b.FollowUp = nil, nil
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("session %d turn %d differs", i, k)
			}
		}
	}
}
