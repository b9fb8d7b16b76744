package loadgen

import (
	"context"

	"github.com/tailgate-llm/tailgate/prompts"
)

// Client sends one request and fills rec: Sent just before the request is
// written, one Chunk per content-bearing chunk as it arrives (rec.Now()),
// FirstAnswer, token counts, Status, End, and ErrorKind/Error on failure.
// It must return when ctx is done, marking the record ErrCancelled (run
// stopped) or ErrTimeout (per-request deadline). Do is called from many
// goroutines at once.
type Client interface {
	Do(ctx context.Context, p *prompts.Prompt, rec *Record)
}

// ClientFunc adapts a function to Client.
type ClientFunc func(ctx context.Context, p *prompts.Prompt, rec *Record)

// Do calls f.
func (f ClientFunc) Do(ctx context.Context, p *prompts.Prompt, rec *Record) { f(ctx, p, rec) }
