package loadgen

import (
	"context"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// An answer with no token fails as empty_answer in a run, except for a
// class that accepts empty answers and for a request that asked for no
// token (max_tokens 0 among its params).
func TestRunnerEmptyAnswers(t *testing.T) {
	t.Parallel()
	empty := &fakeClient{ttft: time.Millisecond} // answers with no token
	opts := func() Options {
		return Options{Closed: true, Requests: 3, Stages: []Stage{{Name: "main", Concurrency: 1, Duration: 5 * time.Second}}}
	}
	for _, tc := range []struct {
		name    string
		p       prompts.Prompt
		classes []string
		want    ErrorKind
	}{
		{"asked for tokens", prompts.Prompt{ID: "p", Class: "chat", MaxTokens: 16}, nil, ErrEmptyAnswer},
		{"max_tokens unset", prompts.Prompt{ID: "p", Class: "chat"}, nil, ErrEmptyAnswer},
		{"class accepts empty answers", prompts.Prompt{ID: "p", Class: "probe"}, []string{"probe"}, ErrNone},
		{"another class accepts them", prompts.Prompt{ID: "p", Class: "chat"}, []string{"probe"}, ErrEmptyAnswer},
		{"asked for none", prompts.Prompt{ID: "p", Class: "chat", Params: map[string]any{"max_tokens": 0}}, nil, ErrNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			o.AcceptEmptyClasses = tc.classes
			recs, _ := collect(t, context.Background(), empty, &Repeat{Prompt: tc.p}, o)
			if len(recs) != 3 {
				t.Fatalf("%d records, want 3", len(recs))
			}
			for _, r := range recs {
				if r.ErrorKind != tc.want {
					t.Errorf("record %d: kind %q (%s), want %q", r.Seq, r.ErrorKind, r.Error, tc.want)
				}
			}
		})
	}
}

// Tokens beyond max_tokens + 1 (the unstreamed EOS a server counts) are
// over_generation; max_tokens + 1 is not.
func TestRunnerOverGeneration(t *testing.T) {
	t.Parallel()
	c := &fakeClient{ttft: time.Millisecond, itl: time.Microsecond, tokens: 6}
	o := Options{Closed: true, Requests: 1, Stages: []Stage{{Name: "main", Concurrency: 1, Duration: 5 * time.Second}}}
	for max, want := range map[int]ErrorKind{4: ErrOverGeneration, 5: ErrNone, 6: ErrNone, 0: ErrNone} {
		client := &maxTokensClient{fakeClient: c, max: max}
		recs, _ := collect(t, context.Background(), client, src(), o)
		if len(recs) != 1 || recs[0].ErrorKind != want {
			t.Errorf("6 tokens for max_tokens %d: kind %q (%s), want %q", max, recs[0].ErrorKind, recs[0].Error, want)
		}
	}
}

// maxTokensClient is a fakeClient that records the max_tokens it sent.
type maxTokensClient struct {
	*fakeClient
	max int
}

func (m *maxTokensClient) Do(ctx context.Context, p *prompts.Prompt, rec *Record) {
	rec.MaxTokens = m.max
	m.fakeClient.Do(ctx, p, rec)
}

func TestOverranCountsChunksAppendedDirectly(t *testing.T) {
	t.Parallel()
	r := &Record{MaxTokens: 1}
	for i := 0; i < OutputBound(1); i++ {
		r.Chunks = append(r.Chunks, Chunk{})
	}
	if r.Overran() {
		t.Fatalf("overran at %d chunks, the bound", len(r.Chunks))
	}
	r.Chunks = append(r.Chunks, Chunk{})
	if !r.Overran() {
		t.Errorf("not overran at %d chunks, past the bound %d", len(r.Chunks), OutputBound(1))
	}
}
