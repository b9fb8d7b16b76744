// Package readiness measures how long a restarted model server takes to
// serve again: from the start of the wait (the restart) to the end of the
// first successful completion, with every failed attempt meanwhile counted
// by kind. It is the maintenance case of acceptance (restart a replica,
// record time-to-ready and the errors seen) and a day-2 baseline of model
// loading time.
//
// An attempt is one real completion request (a short prompt, a few output
// tokens), so "ready" means the model answers, not only that a health
// endpoint does. Attempts start every Interval, each bounded by
// AttemptTimeout; a slow attempt delays the next one, never overlaps it.
package readiness

import (
	"context"
	"fmt"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/prompts"
)

// Schema names ready.json's contract.
const Schema = "tailgate.ready/v1"

// Config is one wait.
type Config struct {
	Client loadgen.Client
	// Prompt is sent on every attempt (default: a one-line question).
	Prompt prompts.Prompt
	// Interval between attempt starts (default 1 s); AttemptTimeout bounds
	// each (default 30 s); Timeout the whole wait (default 10 m).
	Interval, AttemptTimeout, Timeout time.Duration
	// Now is the clock (nil: time.Now); Log gets a line per failed kind
	// change (nil: discarded).
	Now func() time.Time
	Log func(string)
}

// Result is ready.json.
type Result struct {
	Schema  string    `json:"schema"`
	Started time.Time `json:"started"`
	// Ready is set when an attempt succeeded before Timeout.
	Ready   bool       `json:"ready"`
	ReadyAt *time.Time `json:"ready_at,omitempty"`
	// TimeToReadyS runs from Started to the end of the first successful
	// attempt.
	TimeToReadyS *float64 `json:"time_to_ready_s,omitempty"`
	Attempts     int      `json:"attempts"`
	Errors       int      `json:"errors"`
	// ErrorsByKind counts failed attempts by error kind (connect,
	// server_error, timeout, …).
	ErrorsByKind map[string]int `json:"errors_by_kind"`
	// FirstTTFTMs and FirstE2EMs are the first successful answer's.
	FirstTTFTMs *float64 `json:"first_ttft_ms,omitempty"`
	FirstE2EMs  *float64 `json:"first_e2e_ms,omitempty"`
	// Timeline has one entry per change of outcome (the first attempt,
	// each new error kind, the success), not per attempt.
	Timeline []Event `json:"timeline"`
	Note     string  `json:"note,omitempty"`
}

// Event is a change of outcome.
type Event struct {
	AtS    float64 `json:"at_s"`
	Kind   string  `json:"kind"` // an error kind, or "ok"
	Status int     `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// Wait sends attempts until one succeeds, Timeout passes or ctx ends.
// The error is only for a cancelled wait; a timeout is a Result with
// Ready false.
func Wait(ctx context.Context, cfg Config) (*Result, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	interval, attemptTimeout, timeout := cfg.Interval, cfg.AttemptTimeout, cfg.Timeout
	if interval <= 0 {
		interval = time.Second
	}
	if attemptTimeout <= 0 {
		attemptTimeout = 30 * time.Second
	}
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	p := cfg.Prompt
	if p.Text == "" && len(p.Messages) == 0 {
		p = prompts.Prompt{Class: "ready", Text: "Reply with one word: ready?", MaxTokens: 4}
	}
	start := now()
	res := &Result{Schema: Schema, Started: start.UTC(), ErrorsByKind: map[string]int{}, Timeline: []Event{}}
	deadline := start.Add(timeout)
	last := ""
	for {
		if ctx.Err() != nil {
			res.Note = "the wait was interrupted"
			return res, ctx.Err()
		}
		attemptStart := now()
		actx, cancel := context.WithTimeout(ctx, min(attemptTimeout, max(deadline.Sub(attemptStart), time.Millisecond)))
		rec := loadgen.NewRecord(attemptStart)
		pp := p
		cfg.Client.Do(actx, &pp, rec)
		cancel()
		res.Attempts++
		end := now()
		kind := string(rec.ErrorKind)
		if rec.OK() {
			kind = "ok"
		}
		if kind != last {
			ev := Event{AtS: end.Sub(start).Seconds(), Kind: kind, Status: rec.Status, Error: rec.Error}
			res.Timeline = append(res.Timeline, ev)
			if cfg.Log != nil {
				cfg.Log(fmt.Sprintf("%.1fs: %s", ev.AtS, describe(ev)))
			}
			last = kind
		}
		if rec.OK() {
			at := end.UTC()
			ttr := end.Sub(start).Seconds()
			res.Ready, res.ReadyAt, res.TimeToReadyS = true, &at, &ttr
			if ttft, ok := rec.TTFT(); ok {
				res.FirstTTFTMs = new(float64(ttft) / 1e6)
			}
			res.FirstE2EMs = new(float64(rec.E2E()) / 1e6)
			return res, nil
		}
		if ctx.Err() != nil {
			// The attempt failed because the wait was cancelled: not an
			// error of the server.
			res.Note = "the wait was interrupted"
			return res, ctx.Err()
		}
		res.Errors++
		res.ErrorsByKind[string(rec.ErrorKind)]++
		next := attemptStart.Add(interval)
		if !next.Before(deadline) {
			res.Note = fmt.Sprintf("not ready after %s", timeout)
			return res, nil
		}
		if d := next.Sub(now()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
}

func describe(e Event) string {
	s := e.Kind
	if e.Status != 0 {
		s += fmt.Sprintf(" (%d)", e.Status)
	}
	if e.Error != "" {
		s += ": " + e.Error
	}
	return s
}
