package canary

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/tailgate-llm/tailgate/internal/atomicfile"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// StateSchema names the state file's shape.
const StateSchema = "tailgate.canary.state/v1"

// The state file keeps every objective's rolling windows across restarts
// (Options.StateFile): without it a restarted canary starts its windows
// empty, and its burn rates and budget speak of minutes, not days. It is
// written whole and atomically (a crash leaves the previous one) at every
// evaluation and at shutdown, and read once at start. An objective is
// restored only when its definition is unchanged (metric, threshold,
// target, class): counts judged against another threshold mean nothing.
// The time the canary was down is not covered: coverage says so.
type stateFile struct {
	Schema     string           `json:"schema"`
	SavedAt    time.Time        `json:"saved_at"`
	Objectives []objectiveState `json:"objectives"`
}

type objectiveState struct {
	Target     string    `json:"target"`
	SLO        string    `json:"slo"`
	Objective  string    `json:"objective"`
	Definition string    `json:"definition"`
	Since      time.Time `json:"since"`
	Minutes    ringState `json:"minutes"`
	Hours      ringState `json:"hours"`
}

func definition(o *slo.Objective) string { return rules.Describe(o) }

// stateBytes encodes the windows; d.mu is held.
func (d *Daemon) stateBytes(now time.Time) ([]byte, error) {
	f := stateFile{Schema: StateSchema, SavedAt: now.UTC()}
	for k, st := range d.states {
		st.win.mark(now)
		f.Objectives = append(f.Objectives, objectiveState{Target: k.target, SLO: k.slo, Objective: k.objective,
			Definition: definition(st.obj), Since: st.win.since.UTC(), Minutes: st.win.minutes.state(), Hours: st.win.hours.state()})
	}
	return json.Marshal(f)
}

// saveState writes the state file, if there is one.
func (d *Daemon) saveState(now time.Time) error {
	if d.opts.StateFile == "" {
		return nil
	}
	d.mu.Lock()
	b, err := d.stateBytes(now)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	// Every outcome is told: a write that failed costs the windows at the
	// next restart, so it counts, and /healthz fails until one succeeds.
	if err := atomicfile.Write(d.opts.StateFile, b); err != nil {
		err = fmt.Errorf("state file %s: write failed: %w", d.opts.StateFile, err)
		d.metrics.SetStateWrite(false, now)
		d.mu.Lock()
		d.stateErr = err.Error()
		d.mu.Unlock()
		return err
	}
	d.metrics.SetStateWrite(true, now)
	d.mu.Lock()
	d.stateErr = ""
	d.mu.Unlock()
	return nil
}

// stateWriteError is why the latest write of the state file failed, or "".
func (d *Daemon) stateWriteError() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stateErr
}

// loadState restores the windows of the objectives the state file holds
// unchanged; now is this process's start (its time from here on is
// covered, the gap before it is not). A missing file is a first start.
// The int is how many objectives were restored.
func (d *Daemon) loadState(now time.Time) (int, error) {
	if d.opts.StateFile == "" {
		return 0, nil
	}
	b, err := os.ReadFile(d.opts.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("state file: %w", err)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, fmt.Errorf("state file %s: %w", d.opts.StateFile, err)
	}
	if f.Schema != StateSchema {
		return 0, fmt.Errorf("state file %s: schema %q, want %q", d.opts.StateFile, f.Schema, StateSchema)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, o := range f.Objectives {
		st, ok := d.states[stateKey{o.Target, o.SLO, o.Objective}]
		if !ok || definition(st.obj) != o.Definition || o.Since.After(now) {
			continue
		}
		w := newWindows(st.spec.Window, o.Since)
		w.minutes.restore(o.Minutes)
		w.hours.restore(o.Hours)
		w.marked = now
		st.win = w
		n++
	}
	return n, nil
}
