package canary

import (
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/tailgate-llm/tailgate/internal/redact"
)

// StatusSchema names the /status document's shape.
const StatusSchema = "tailgate.canary.status/v1"

// Status is the /status document: every target's probes and, per
// objective, the rolling windows' good and bad events, burn rates and the
// budget left, so a user without Prometheus still sees the SLO.
type Status struct {
	Schema      string         `json:"schema"`
	Version     string         `json:"version,omitempty"`
	Started     time.Time      `json:"started"`
	EvaluatedAt time.Time      `json:"evaluated_at"`
	Config      ConfigStatus   `json:"config"`
	Targets     []TargetStatus `json:"targets"`
}

// ConfigStatus says which configuration runs and whether the last reload
// took.
type ConfigStatus struct {
	File                 string    `json:"file"`
	LoadedAt             time.Time `json:"loaded_at"`
	LastReloadSuccessful bool      `json:"last_reload_successful"`
	LastReloadError      string    `json:"last_reload_error,omitempty"`
}

// TargetStatus is one target.
type TargetStatus struct {
	Name          string            `json:"name"`
	URL           string            `json:"url"`
	Model         string            `json:"model"`
	Schedule      string            `json:"schedule"`
	SLO           string            `json:"slo"`
	Probes        ProbeCounts       `json:"probes"`
	LastSuccess   *time.Time        `json:"last_success,omitempty"`
	LastError     *time.Time        `json:"last_error,omitempty"`
	LastErrorText string            `json:"last_error_text,omitempty"`
	Objectives    []ObjectiveStatus `json:"objectives"`
	// NotJudged are the objectives a canary cannot judge (floors,
	// queue_delay), with why.
	NotJudged []NotJudged `json:"not_judged,omitempty"`
}

// ProbeCounts count finished probes since the daemon started (probes it
// cancelled itself are not counted).
type ProbeCounts struct {
	OK     uint64 `json:"ok"`
	Failed uint64 `json:"failed"`
}

// ObjectiveStatus is one objective over its rolling windows.
type ObjectiveStatus struct {
	Name   string `json:"name"`
	Metric string `json:"metric"`
	Class  string `json:"class,omitempty"`
	// Objective is the target fraction of good events; ErrorBudget 1 − it.
	Objective   float64        `json:"objective"`
	ErrorBudget float64        `json:"error_budget"`
	Windows     []WindowStatus `json:"windows"`
	// SLOWindow covers the SLO window as far as the process has seen it
	// (SeenS seconds); BudgetRemaining is the share of the budget left
	// there (negative: overspent).
	SLOWindow       WindowStatus `json:"slo_window"`
	BudgetRemaining float64      `json:"budget_remaining"`
}

func (o ObjectiveStatus) coverage(label string) float64 {
	for _, w := range o.Windows {
		if w.Window == label {
			return w.Coverage
		}
	}
	return 0
}

func (o ObjectiveStatus) burn(label string) float64 {
	for _, w := range o.Windows {
		if w.Window == label {
			return w.BurnRate
		}
	}
	return 0
}

// WindowStatus is one rolling window: events, their error ratio and the
// burn rate (error ratio / error budget; 0 without events), and Coverage,
// the share of the window the canary ran through (1 once it has run a
// whole window; a restart without a state file, or downtime, lowers it).
// A burn rate or budget over a window of low coverage speaks of less time
// than the window's name says.
type WindowStatus struct {
	Window     string  `json:"window"`
	Good       uint64  `json:"good"`
	Bad        uint64  `json:"bad"`
	ErrorRatio float64 `json:"error_ratio"`
	BurnRate   float64 `json:"burn_rate"`
	Coverage   float64 `json:"coverage"`
	SeenS      float64 `json:"seen_s,omitempty"`
}

// NotJudged is an objective left to acceptance.
type NotJudged struct {
	Objective string `json:"objective"`
	Metric    string `json:"metric"`
	Reason    string `json:"reason"`
}

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
