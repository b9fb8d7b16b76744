package results

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
)

// HistogramsSchema names histograms.json's contract.
const HistogramsSchema = "tailgate.histograms/v1"

// Histograms is histograms.json: a run's metrics whole (every class and
// stage, counters and HDR histograms), its run info, and what it ran, so
// tailgate merge rebuilds the shards' combined summary exactly, whatever
// form their records were kept in (none included). The summary alone
// cannot be merged: its quantiles are not additive.
type Histograms struct {
	Schema string `json:"schema"`
	// Identity is what every shard of one schedule shares: the load (mode,
	// arrival, stages, seed, limits), target, API, model, and the prompts'
	// identity (the mix's hash), each a string. Merge refuses shards whose
	// identities differ, naming the key.
	Identity map[string]string    `json:"identity"`
	Meta     HistogramsMeta       `json:"meta"`
	Info     schema.InfoState     `json:"info"`
	Metrics  *schema.MetricsState `json:"metrics"`
	// Records is the form requests.jsonl was kept in.
	Records RecordsForm `json:"records"`
	// Streaming says the client asked for streamed answers.
	Streaming bool `json:"streaming"`
	// MaxErrorRate is the validity limit the run was held to.
	MaxErrorRate float64 `json:"max_error_rate"`
	// SelfCheckWarns: a distorting generator was a warning only.
	SelfCheckWarns bool `json:"self_check_warns,omitempty"`
	// Validity is every validity bound the run was held to (nil in runs
	// saved before the bounds were: MaxErrorRate and SelfCheckWarns then).
	Validity *slo.Validity `json:"validity,omitempty"`
}

// Bounds are the validity bounds the run was held to.
func (h *Histograms) Bounds() slo.Validity {
	if h.Validity != nil {
		return *h.Validity
	}
	v := slo.ValidityFromErrorRate(h.MaxErrorRate)
	v.DistortionWarns = h.SelfCheckWarns
	return v
}

// HistogramsMeta is schema.SummaryMeta, saved.
type HistogramsMeta struct {
	Version string         `json:"version"`
	Target  string         `json:"target"`
	API     string         `json:"api"`
	Model   string         `json:"model"`
	Load    map[string]any `json:"load"`
}

// SummaryMeta is the saved meta back in the summary's form.
func (m HistogramsMeta) SummaryMeta() schema.SummaryMeta {
	return schema.SummaryMeta{Version: m.Version, Target: m.Target, API: m.API, Model: m.Model, Load: m.Load}
}

// WriteHistograms writes histograms.json into d atomically.
func (d Dir) WriteHistograms(h *Histograms) error {
	h.Schema = HistogramsSchema
	return WriteJSON(d.Path(HistogramsFile), h)
}

// ReadHistograms reads d's histograms.json.
func (d Dir) ReadHistograms() (*Histograms, error) {
	p := d.Path(HistogramsFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var h Histograms
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if h.Schema != HistogramsSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", p, h.Schema, HistogramsSchema)
	}
	if h.Metrics == nil {
		return nil, fmt.Errorf("%s: no metrics", p)
	}
	return &h, nil
}
