package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/tailgate-llm/tailgate/telemetry"
)

// QueueDelay is a stage's server queue-delay histogram (its increase over
// the stage) as the SLO judge and queue_delay.json take it: nil when there
// is nothing to judge and no reason to give; a mean-only or empty one is
// kept when it says why it has no buckets (llama.cpp, Triton's mean-only
// counters), so queue_delay objectives are NO_DATA with that reason.
func QueueDelay(h *telemetry.Histogram) *telemetry.Histogram {
	if h == nil || h.MeanOnly() && h.Missing == "" {
		return nil
	}
	return h
}

// QueueDelayByStage keeps each stage's histogram that QueueDelay keeps.
func QueueDelayByStage(h map[string]*telemetry.Histogram) map[string]*telemetry.Histogram {
	out := map[string]*telemetry.Histogram{}
	for st, hist := range h {
		if q := QueueDelay(hist); q != nil {
			out[st] = q
		}
	}
	return out
}

// WriteQueueDelay writes queue_delay.json into d: per stage, the server
// histogram that queue_delay objectives are judged on, so check judges
// them again. Each is a telemetry.Histogram in its one JSON form.
func (d Dir) WriteQueueDelay(byStage map[string]*telemetry.Histogram) error {
	return WriteJSON(d.Path(QueueDelayFile), byStage)
}

// ReadQueueDelay reads the per-stage queue-delay histograms of d (none:
// nil). A queue_delay.json of an earlier version ({"le_s": bound} buckets,
// no count) still reads. A run directory written before queue_delay.json
// existed still has the whole run's histogram in summary.json: it is used
// for the run's one stage when stages names exactly one.
func (d Dir) ReadQueueDelay(stages []string) (map[string]*telemetry.Histogram, error) {
	p := d.Path(QueueDelayFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return d.queueFromSummary(stages), nil
	}
	if err != nil {
		return nil, err
	}
	var in map[string]*telemetry.Histogram
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	out := map[string]*telemetry.Histogram{}
	for st, h := range in {
		if h == nil {
			continue
		}
		if n := len(h.Buckets); n > 0 && h.Count == 0 {
			h.Count = h.Buckets[n-1].Count // the earlier form kept no count
		}
		out[st] = h
	}
	return out, nil
}

func (d Dir) queueFromSummary(stages []string) map[string]*telemetry.Histogram {
	if len(stages) != 1 {
		return nil
	}
	s, err := d.ReadSummary()
	if err != nil || s.Telemetry == nil || s.Telemetry.QueueDelay == nil || len(s.Telemetry.QueueDelay.Buckets) == 0 {
		return nil
	}
	qd := s.Telemetry.QueueDelay
	if q := QueueDelay(&telemetry.Histogram{Source: qd.Source, Count: qd.Count, Buckets: qd.Buckets}); q != nil {
		return map[string]*telemetry.Histogram{stages[0]: q}
	}
	return nil
}
