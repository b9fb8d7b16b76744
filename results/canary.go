package results

import "time"

// CanaryStatusSchema names the /status document's shape.
const CanaryStatusSchema = "tailgate.canary.status/v1"

// CanaryStatus is the canary's /status document (saved copies are read
// by the periodic review): every target's probes and, per
// objective, the rolling windows' good and bad events, burn rates and the
// budget left, so a user without Prometheus still sees the SLO.
type CanaryStatus struct {
	Schema      string               `json:"schema"`
	Version     string               `json:"version,omitempty"`
	Started     time.Time            `json:"started"`
	EvaluatedAt time.Time            `json:"evaluated_at"`
	Config      CanaryConfigStatus   `json:"config"`
	Targets     []CanaryTargetStatus `json:"targets"`
}

// CanaryConfigStatus says which configuration runs and whether the last reload
// took.
type CanaryConfigStatus struct {
	File                 string    `json:"file"`
	LoadedAt             time.Time `json:"loaded_at"`
	LastReloadSuccessful bool      `json:"last_reload_successful"`
	LastReloadError      string    `json:"last_reload_error,omitempty"`
}

// CanaryTargetStatus is one target.
type CanaryTargetStatus struct {
	Name          string                  `json:"name"`
	URL           string                  `json:"url"`
	Model         string                  `json:"model"`
	Schedule      string                  `json:"schedule"`
	SLO           string                  `json:"slo"`
	Probes        CanaryProbeCounts       `json:"probes"`
	LastSuccess   *time.Time              `json:"last_success,omitempty"`
	LastError     *time.Time              `json:"last_error,omitempty"`
	LastErrorText string                  `json:"last_error_text,omitempty"`
	Objectives    []CanaryObjectiveStatus `json:"objectives"`
	// NotJudged are the objectives a canary cannot judge (floors,
	// queue_delay), with why.
	NotJudged []CanaryNotJudged `json:"not_judged,omitempty"`
}

// CanaryProbeCounts count finished probes since the daemon started (probes it
// cancelled itself are not counted).
type CanaryProbeCounts struct {
	OK     uint64 `json:"ok"`
	Failed uint64 `json:"failed"`
}

// CanaryObjectiveStatus is one objective over its rolling windows.
type CanaryObjectiveStatus struct {
	Name   string `json:"name"`
	Metric string `json:"metric"`
	Class  string `json:"class,omitempty"`
	// Objective is the target fraction of good events; ErrorBudget 1 − it.
	Objective   float64              `json:"objective"`
	ErrorBudget float64              `json:"error_budget"`
	Windows     []CanaryWindowStatus `json:"windows"`
	// SLOWindow covers the SLO window as far as the process has seen it
	// (SeenS seconds); BudgetRemaining is the share of the budget left
	// there (negative: overspent).
	SLOWindow       CanaryWindowStatus `json:"slo_window"`
	BudgetRemaining float64            `json:"budget_remaining"`
}

// Coverage is the coverage of the window labelled label (0: none).
func (o CanaryObjectiveStatus) Coverage(label string) float64 {
	for _, w := range o.Windows {
		if w.Window == label {
			return w.Coverage
		}
	}
	return 0
}

// BurnRate is the burn rate over the window labelled label (0: none).
func (o CanaryObjectiveStatus) BurnRate(label string) float64 {
	for _, w := range o.Windows {
		if w.Window == label {
			return w.BurnRate
		}
	}
	return 0
}

// CanaryWindowStatus is one rolling window: events, their error ratio and the
// burn rate (error ratio / error budget; 0 without events), and Coverage,
// the share of the window the canary ran through (1 once it has run a
// whole window; a restart without a state file, or downtime, lowers it).
// A burn rate or budget over a window of low coverage speaks of less time
// than the window's name says.
type CanaryWindowStatus struct {
	Window     string  `json:"window"`
	Good       uint64  `json:"good"`
	Bad        uint64  `json:"bad"`
	ErrorRatio float64 `json:"error_ratio"`
	BurnRate   float64 `json:"burn_rate"`
	Coverage   float64 `json:"coverage"`
	SeenS      float64 `json:"seen_s,omitempty"`
}

// CanaryNotJudged is an objective left to acceptance.
type CanaryNotJudged struct {
	Objective string `json:"objective"`
	Metric    string `json:"metric"`
	Reason    string `json:"reason"`
}
