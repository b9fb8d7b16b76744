package slo

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
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

	node *yaml.Node
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

func (d *decoder) waivers(f *fields, key string) []Waiver {
	var out []Waiver
	for i, n := range f.list(key) {
		path := index(key, i)
		wf := d.mapping(n, path, "objective", "stage", "class", "owner", "reason", "expires")
		w := Waiver{File: d.file, Line: wf.node.Line, node: wf.node}
		errs := len(d.errs)
		if wf.require("objective") {
			w.Objective = wf.name("objective")
			w.node = wf.line("objective")
		}
		if wf.has("stage") {
			w.Stage = wf.name("stage")
		}
		if wf.has("class") {
			w.Class = wf.name("class")
		}
		if wf.require("owner") {
			if w.Owner = wf.str("owner"); w.Owner == "" {
				d.errorf(wf.line("owner"), join(path, "owner"), "empty: a waiver names the person who owns it")
			}
		}
		if wf.require("reason") {
			if w.Reason = wf.str("reason"); w.Reason == "" {
				d.errorf(wf.line("reason"), join(path, "reason"), "empty: a waiver says why")
			}
		}
		if wf.require("expires") {
			if v, ok := wf.scalar("expires"); ok {
				t, err := ParseExpiry(v.Value)
				if err != nil {
					d.errorf(v, join(path, "expires"), "%v", err)
				}
				w.Expires, w.ExpiresText = t, v.Value
			}
		}
		if w.Objective == string(ManualResult) && w.Stage == "" {
			d.errorf(wf.node, join(path, "stage"), "a waiver of a manual result names its stage")
		}
		if len(d.errs) == errs {
			out = append(out, w)
		}
	}
	return out
}
