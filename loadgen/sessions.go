package loadgen

import (
	"time"
)

// SessionFigures are one agent session's figures, computed from its
// records by Add alone, so the runner, check and merge get the same
// numbers. Warm-up calls are left out.
type SessionFigures struct {
	Session, Trace string
	// Start is the first sent call's intended start, End the last sent
	// call's end (both 0 when no call was sent).
	Start, End time.Duration
	// Calls counts every call's record; OK the answered, Failed those the
	// server failed (Counted kinds), Cancelled those cancelled by
	// dependency, Cut the rest (dropped, cut at the end, cancelled by the
	// run): the calls the generator did not let finish.
	Calls, OK, Failed, Cancelled, Cut int
	InputTokens, OutputTokens         int64
	// ToolWait sums the tool delays on the edges of the calls sent.
	ToolWait time.Duration
	// Promised is the prompt tokens the trace's hash ids say repeat an
	// earlier call's blocks, of PromisedOf prompt tokens in the trace's
	// calls: the hit rate a perfect prefix cache would give. PromisedOf
	// is 0 when the trace gave no hash ids (nothing is promised, not
	// even 0). Only the runner knows them: records do not carry them.
	Promised, PromisedOf int
	sent                 bool
}

// PromisedShare is Promised / PromisedOf; ok is false when the trace
// promised nothing.
func (f *SessionFigures) PromisedShare() (float64, bool) {
	if f.PromisedOf <= 0 {
		return 0, false
	}
	return float64(f.Promised) / float64(f.PromisedOf), true
}

// Add counts one record of the session.
func (f *SessionFigures) Add(r *Record) {
	if f.Session == "" {
		f.Session = r.Session
	}
	if r.Warmup {
		return
	}
	f.Calls++
	switch {
	case r.OK():
		f.OK++
	case r.ErrorKind == ErrCancelledByDependency:
		f.Cancelled++
	case r.ErrorKind.Counted():
		f.Failed++
	default:
		f.Cut++
	}
	if r.NotSent || r.ErrorKind == ErrDropped || r.ErrorKind == ErrCancelledByDependency {
		return
	}
	if !f.sent || r.Intended < f.Start {
		f.Start = r.Intended
	}
	if !f.sent || r.End > f.End {
		f.End = r.End
	}
	f.sent = true
	f.InputTokens += int64(r.InputTokens)
	f.OutputTokens += int64(r.OutputTokens)
	f.ToolWait += r.ToolWait
}

// Sent reports whether any call of the session was sent.
func (f *SessionFigures) Sent() bool { return f.sent }

// Duration is first call's intended start → last call's end; ok is
// false when no call was sent.
func (f *SessionFigures) Duration() (time.Duration, bool) { return f.End - f.Start, f.sent }

// Complete reports whether every call ran its course: none was cut by
// the generator (the session's duration is then the whole session's).
func (f *SessionFigures) Complete() bool { return f.Cut == 0 }

// SessionLine is a sessions.jsonl line.
type SessionLine struct {
	Session      string `json:"session"`
	Trace        string `json:"trace,omitempty"`
	StartUs      int64  `json:"start_us"`
	EndUs        int64  `json:"end_us"`
	Calls        int    `json:"calls"`
	OK           int    `json:"ok"`
	Failed       int    `json:"failed"`
	Cancelled    int    `json:"cancelled"`
	Cut          int    `json:"cut,omitempty"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	ToolWaitUs   int64  `json:"tool_wait_us"`
	// PromisedPrefixTokens and PromisedPrefixShare are the prefix the
	// trace's hash ids promise (absent without hash ids).
	PromisedPrefixTokens *int     `json:"promised_prefix_tokens,omitempty"`
	PromisedPrefixShare  *float64 `json:"promised_prefix_share,omitempty"`
}

// Line is f as its sessions.jsonl line.
func (f *SessionFigures) Line() SessionLine {
	l := SessionLine{Session: f.Session, Trace: f.Trace, StartUs: us(f.Start), EndUs: us(f.End),
		Calls: f.Calls, OK: f.OK, Failed: f.Failed, Cancelled: f.Cancelled, Cut: f.Cut,
		InputTokens: f.InputTokens, OutputTokens: f.OutputTokens, ToolWaitUs: us(f.ToolWait)}
	if share, ok := f.PromisedShare(); ok {
		n := f.Promised
		l.PromisedPrefixTokens, l.PromisedPrefixShare = &n, &share
	}
	return l
}

// SessionOutcome is how a session ended.
type SessionOutcome int

// How a session ended.
const (
	SessionOK     SessionOutcome = iota // every call answered
	SessionFailed                       // the server failed a call (its cancelled dependents with it)
	SessionCut                          // the generator cut a call (dropped, cut at the end, not due) and none failed
)

// Outcome is how the session ended, by the rule summary.json's counts use.
func (f *SessionFigures) Outcome() SessionOutcome {
	switch {
	case f.Failed > 0 || f.Cancelled > 0:
		return SessionFailed
	case f.Cut > 0:
		return SessionCut
	}
	return SessionOK
}

// SessionRoller rolls session calls' records up to their sessions: the
// runner's figures where the last record carries them, and for records
// read back from requests.jsonl, by SessionFigures.Add until the record
// marked last. The summary and the SLO judge both use it, so a session is
// the same whichever reads it.
type SessionRoller struct {
	open map[string]*SessionFigures
}

// Add counts r and returns its session's figures once r is the session's
// last record. Records of no session call are ignored.
func (s *SessionRoller) Add(r *Record) (*SessionFigures, bool) {
	if r.Call == "" || r.Session == "" {
		return nil, false
	}
	if f := r.SessionDone; f != nil {
		if o := s.open[r.Session]; o != nil {
			delete(s.open, r.Session)
		}
		return f, true
	}
	if s.open == nil {
		s.open = map[string]*SessionFigures{}
	}
	f := s.open[r.Session]
	if f == nil {
		f = &SessionFigures{}
		s.open[r.Session] = f
	}
	f.Add(r)
	if !r.SessionLast {
		return nil, false
	}
	delete(s.open, r.Session)
	return f, true
}

// Open is how many sessions have records but no last record yet.
func (s *SessionRoller) Open() int { return len(s.open) }
