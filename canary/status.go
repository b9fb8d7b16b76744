package canary

import (
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/results"
)

// StatusSchema and the types below are results' (report reads saved
// /status documents): these are their names here.
const StatusSchema = results.CanaryStatusSchema

// The /status document, section by section.
type (
	// Status is the whole document.
	Status = results.CanaryStatus
	// ConfigStatus is the canary file loaded and the last reload.
	ConfigStatus = results.CanaryConfigStatus
	// TargetStatus is one target: its probes and objectives.
	TargetStatus = results.CanaryTargetStatus
	// ProbeCounts is a target's probes by outcome.
	ProbeCounts = results.CanaryProbeCounts
	// ObjectiveStatus is one objective of one target: windows, burn rates, budget left.
	ObjectiveStatus = results.CanaryObjectiveStatus
	// WindowStatus is one rolling window of an objective.
	WindowStatus = results.CanaryWindowStatus
	// NotJudged is an objective the canary does not judge, and why.
	NotJudged = results.CanaryNotJudged
)

// Status evaluates the windows now and returns the document.
func (d *Daemon) Status() *Status { return d.evaluate(time.Now()) }

func (d *Daemon) serveStatus(w http.ResponseWriter, r *http.Request) {
	s := d.Status()
	clampInf(s)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(s)
}

// clampInf replaces the +Inf burn rate of a zero budget (target 100%)
// with the largest float, which JSON can carry.
func clampInf(s *Status) {
	for i := range s.Targets {
		for j := range s.Targets[i].Objectives {
			o := &s.Targets[i].Objectives[j]
			for k := range o.Windows {
				if math.IsInf(o.Windows[k].BurnRate, 0) {
					o.Windows[k].BurnRate = math.MaxFloat64
				}
			}
			if math.IsInf(o.SLOWindow.BurnRate, 0) {
				o.SLOWindow.BurnRate = math.MaxFloat64
			}
			if math.IsInf(o.BudgetRemaining, 0) {
				o.BudgetRemaining = -math.MaxFloat64
			}
		}
	}
}

func redactURL(s string) string { return redact.URL(s) }
