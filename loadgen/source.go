package loadgen

import (
	"strconv"

	"github.com/tailgate-llm/tailgate/prompts"
)

// Source yields the prompts to send, in order. The runner calls Next from
// one goroutine at a time; io.EOF ends a finite source (a trace).
type Source interface {
	Next() (*prompts.Prompt, error)
}

// Repeat is a Source that yields copies of one prompt forever. A prompt
// with an ID gets "<id>-<n>" so IDs stay unique; without one, clients fall
// back to the record's sequence number.
type Repeat struct {
	Prompt prompts.Prompt
	n      int
}

// Next implements Source.
func (r *Repeat) Next() (*prompts.Prompt, error) {
	p := r.Prompt
	if p.ID != "" {
		p.ID += "-" + strconv.Itoa(r.n)
	}
	r.n++
	return &p, nil
}
