package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// QueueTelemetry converts a server queue-delay histogram (its increase over
// a stage) into the SLO judge's input: nil without telemetry, and no
// buckets but the reason when the server exposes none (llama.cpp, Triton's
// mean-only counters), so queue_delay objectives are NO_DATA with it.
func QueueTelemetry(h *telemetry.Histogram) *slo.QueueTelemetry {
	if h == nil {
		return nil
	}
	if len(h.Buckets) == 0 || h.MeanOnly() {
		if h.Missing == "" {
			return nil
		}
		return &slo.QueueTelemetry{Source: h.Source, Missing: h.Missing}
	}
	q := &slo.QueueTelemetry{Source: h.Source}
	for _, b := range h.Buckets {
		q.Buckets = append(q.Buckets, slo.Bucket{Le: slo.BucketBound(b.LeSeconds), Count: b.Count})
	}
	return q
}

// QueueTelemetryByStage converts each stage's histogram; stages without
// buckets are left out.
func QueueTelemetryByStage(h map[string]*telemetry.Histogram) map[string]*slo.QueueTelemetry {
	out := map[string]*slo.QueueTelemetry{}
	for st, hist := range h {
		if q := QueueTelemetry(hist); q != nil {
			out[st] = q
		}
	}
	return out
}

// queueFileJSON is queue_delay.json: per stage, the server histogram that
// queue_delay objectives are judged on, so check judges them again.
type queueFileJSON map[string]queueJSON

type queueJSON struct {
	Source  string            `json:"source"`
	Buckets []queueBucketJSON `json:"buckets"`
	Missing string            `json:"missing,omitempty"` // why there are no buckets
}

type queueBucketJSON struct {
	LeSeconds *float64 `json:"le_s"` // null: +Inf
	Count     uint64   `json:"count"`
}

// WriteQueueDelay writes queue_delay.json into d.
func (d Dir) WriteQueueDelay(byStage map[string]*slo.QueueTelemetry) error {
	out := queueFileJSON{}
	for st, q := range byStage {
		j := queueJSON{Source: q.Source, Missing: q.Missing, Buckets: []queueBucketJSON{}}
		for _, b := range q.Buckets {
			var le *float64
			if b.Le != slo.InfBound {
				v := b.Le.Seconds()
				le = &v
			}
			j.Buckets = append(j.Buckets, queueBucketJSON{LeSeconds: le, Count: b.Count})
		}
		out[st] = j
	}
	return WriteJSON(d.Path(QueueDelayFile), out)
}

// ReadQueueDelay reads the per-stage queue-delay histograms of d (none:
// nil). A run directory written before queue_delay.json existed still has
// the whole run's histogram in summary.json: it is used for the run's one
// stage when stages names exactly one.
func (d Dir) ReadQueueDelay(stages []string) (map[string]*slo.QueueTelemetry, error) {
	p := d.Path(QueueDelayFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return d.queueFromSummary(stages), nil
	}
	if err != nil {
		return nil, err
	}
	var in queueFileJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	out := map[string]*slo.QueueTelemetry{}
	for st, j := range in {
		q := &slo.QueueTelemetry{Source: j.Source, Missing: j.Missing}
		for _, b := range j.Buckets {
			le := slo.InfBound
			if b.LeSeconds != nil {
				le = slo.BucketBound(*b.LeSeconds)
			}
			q.Buckets = append(q.Buckets, slo.Bucket{Le: le, Count: b.Count})
		}
		out[st] = q
	}
	return out, nil
}

func (d Dir) queueFromSummary(stages []string) map[string]*slo.QueueTelemetry {
	if len(stages) != 1 {
		return nil
	}
	s, err := d.ReadSummary()
	if err != nil || s.Telemetry == nil || s.Telemetry.QueueDelay == nil || len(s.Telemetry.QueueDelay.Buckets) == 0 {
		return nil
	}
	qd := s.Telemetry.QueueDelay
	h := &telemetry.Histogram{Source: qd.Source, Count: qd.Count, Buckets: qd.Buckets}
	if q := QueueTelemetry(h); q != nil {
		return map[string]*slo.QueueTelemetry{stages[0]: q}
	}
	return nil
}
