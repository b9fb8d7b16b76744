package slo

import (
	"fmt"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// Waiver accepts a failing objective for a time: a person (Owner) says why
// (Reason) and until when (Expires). It may be narrowed to one stage and
// one class. Objective "manual" with a stage waives a manual stage.
type Waiver struct {
	Objective string `json:"objective"`
	Stage     string `json:"stage,omitempty"`
	Class     string `json:"class,omitempty"`
	Owner     string `json:"owner"`
	Reason    string `json:"reason"`
	// Expires is the first instant at which the waiver no longer waives.
	// A date in the file (2026-12-31) waives through the end of that day,
	// UTC; a full RFC 3339 time expires at that instant.
	Expires time.Time `json:"expires"`
	// ExpiresText is the expiry as written.
	ExpiresText string `json:"expires_text"`
	File        string `json:"file,omitempty"`
	Line        int    `json:"line,omitempty"`

	objectiveLine int // where the objective is named, for errors
}

// Expired reports whether the waiver no longer waives at now.
func (w *Waiver) Expired(now time.Time) bool { return !now.Before(w.Expires) }

// Matches reports whether the waiver covers objective on stage and class.
func (w *Waiver) Matches(objective, stage, class string) bool {
	return w.Objective == objective && (w.Stage == "" || w.Stage == stage) && (w.Class == "" || w.Class == class)
}

// Describe is "waived by OWNER until DATE: REASON".
func (w *Waiver) Describe() string {
	return fmt.Sprintf("waived by %s until %s: %s", w.Owner, w.ExpiresText, w.Reason)
}

// ParseExpiry reads a waiver expiry: an RFC 3339 date (waives through that
// day, UTC) or an RFC 3339 time.
func ParseExpiry(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.AddDate(0, 0, 1), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 date (2026-12-31) or time (2026-12-31T18:00:00Z)", s)
	}
	return t, nil
}

// waivers reads the waivers list of a spec or plan.
func (r reader) waivers(f yamlwalk.Map) []Waiver {
	n, ok := f.Get("waivers")
	if !ok {
		return nil
	}
	list, _ := n.List()
	var out []Waiver
	for _, it := range list {
		start := r.doc.Count()
		wf, _ := it.Map("objective", "stage", "class", "owner", "reason", "expires")
		if !it.IsMap() {
			continue
		}
		w := Waiver{File: r.doc.File(), Line: it.Line(), objectiveLine: it.Line()}
		if v, ok := wf.Require("objective"); ok {
			w.Objective = name(v)
			w.objectiveLine = wf.KeyLine("objective")
		}
		w.Stage = optional(wf, "stage", name)
		w.Class = optional(wf, "class", name)
		if v, ok := wf.Require("owner"); ok {
			if w.Owner, ok = v.Text(); ok && w.Owner == "" {
				v.Errorf("empty: a waiver names the person who owns it")
			}
		}
		if v, ok := wf.Require("reason"); ok {
			if w.Reason, ok = v.Text(); ok && w.Reason == "" {
				v.Errorf("empty: a waiver says why")
			}
		}
		if v, ok := wf.Require("expires"); ok {
			if w.ExpiresText, ok = v.Text(); ok {
				t, err := ParseExpiry(w.ExpiresText)
				if err != nil {
					v.Errorf("%v", err)
				}
				w.Expires = t
			}
		}
		if st, ok := wf.Get("stage"); !ok && w.Objective == string(ManualResult) {
			st.Errorf("a waiver of a manual result names its stage")
		}
		if r.clean(start) {
			out = append(out, w)
		}
	}
	return out
}

// applyWaivers sets Status from Result and the first matching unexpired
// waiver; an expired one that matches is reported and does not waive.
func applyWaivers(v *Verdict, waivers []Waiver, now time.Time) {
	v.Status = v.Result
	var expired *Waiver
	for i := range waivers {
		w := &waivers[i]
		if !w.Matches(v.Objective, v.Stage, v.Class) {
			continue
		}
		if w.Expired(now) {
			if expired == nil {
				expired = w
			}
			continue
		}
		wc := *w
		v.Waiver, v.WaiverExpired = &wc, false
		switch v.Result {
		case Fail, NoData, Pending, Inconclusive:
			v.Status = Waived
			addNote(v, wc.Describe())
		case Pass:
			addNote(v, "waiver by "+wc.Owner+" not needed: passed")
		}
		return
	}
	if expired != nil {
		wc := *expired
		v.Waiver, v.WaiverExpired = &wc, true
		if v.Result != Pass {
			addNote(v, fmt.Sprintf("waiver by %s expired %s (%s): no longer waives", wc.Owner, wc.ExpiresText, wc.Reason))
		} else {
			addNote(v, fmt.Sprintf("waiver by %s expired %s", wc.Owner, wc.ExpiresText))
		}
	}
}
