package pipeline

import (
	"fmt"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// workBucket is the resolution at which output tokens and completions
// are placed in time, to count the work done inside an energy window.
const workBucket = 50 * time.Millisecond

// workTimeline counts output tokens (when their chunk arrived) and
// successful completions (when they ended) per workBucket since the
// runner's epoch, warm-up included: an energy window counts all the work
// the GPUs did in it, whichever request it was for.
type workTimeline struct {
	tokens, done []int64
}

func (w *workTimeline) grow(i int) {
	for len(w.tokens) <= i {
		w.tokens, w.done = append(w.tokens, 0), append(w.done, 0)
	}
}

func (w *workTimeline) add(rec *loadgen.Record) {
	if !rec.OK() || rec.End < 0 {
		return
	}
	counted := 0
	for _, c := range rec.Chunks {
		if c.At < 0 || c.Tokens <= 0 {
			continue
		}
		i := int(c.At / workBucket)
		w.grow(i)
		w.tokens[i] += int64(c.Tokens)
		counted += c.Tokens
	}
	i := int(rec.End / workBucket)
	w.grow(i)
	// Tokens the server counted beyond the chunks (an answer in one body,
	// an EOS token never streamed, a compact record) land at the end.
	if rest := rec.OutputTokens - counted; rest > 0 {
		w.tokens[i] += int64(rest)
	}
	w.done[i]++
}

// between sums the work in [from, to) of the timeline, offset being where
// the timeline's zero (the runner's epoch) lies on the window's clock.
func (w *workTimeline) between(from, to, offset time.Duration) (tokens, done int64) {
	// Buckets that the window's ends cut are counted whole: the sampler
	// reads the counters after the round it stamps begins.
	lo, hi := int((from-offset)/workBucket), int((to-offset+workBucket-1)/workBucket)
	for i := max(lo, 0); i < min(hi, len(w.tokens)); i++ {
		tokens += w.tokens[i]
		done += w.done[i]
	}
	return tokens, done
}

// energyOf puts a window's energy beside the work done in that window:
// joules per output token and per request, and, with a GPU-hour price,
// the cost per million output tokens.
func energyOf(win *telemetry.EnergyWindow, w *workTimeline, offset time.Duration, gpuHourUSD float64) *results.Energy {
	e := &results.Energy{EnergyWindow: *win}
	from := time.Duration(win.FromS * float64(time.Second))
	to := time.Duration(win.ToS * float64(time.Second))
	e.OutputTokens, e.Requests = w.between(from, to, offset)
	if e.Source == telemetry.EnergyPower {
		e.Note = "estimated from power readings integrated over time (no energy counter)"
	}
	if e.OutputTokens > 0 {
		e.JoulesPerOutputToken = new(e.Joules / float64(e.OutputTokens))
	}
	if e.Requests > 0 {
		e.JoulesPerRequest = new(e.Joules / float64(e.Requests))
	}
	if gpuHourUSD > 0 {
		e.GPUHourCostUSD = gpuHourUSD
		if e.OutputTokens > 0 {
			hours := (to - from).Hours()
			e.CostPerMillionOutputTokensUSD = new(float64(e.GPUs) * hours * gpuHourUSD / float64(e.OutputTokens) * 1e6)
		}
	}
	if e.OutputTokens == 0 {
		e.Note = joinNote(e.Note, "no output tokens in the window: no energy or cost per token")
	}
	return e
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// noEnergy says why a run sampled telemetry but has no energy figures.
func noEnergy(sum *telemetry.Summary) string {
	if len(sum.GPUs) == 0 {
		return "no GPU was sampled (NVML, dcgm-exporter or the server's GPU gauges): energy per token not measured"
	}
	return fmt.Sprintf("the %d GPUs sampled report neither an energy counter nor power: energy per token not measured", len(sum.GPUs))
}
