package loadgen

import "github.com/tailgate-llm/tailgate/prompts"

// Repeat is a Source that yields copies of one prompt forever, with
// IDs made unique by sequence ("<id>-<n>").
type Repeat struct {
	Prompt prompts.Prompt
	n      int
}

// Next implements Source.
func (r *Repeat) Next() (*prompts.Prompt, error) {
	p := r.Prompt
	r.n++
	return &p, nil
}
