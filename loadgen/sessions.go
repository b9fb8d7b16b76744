package loadgen

import (
	"strconv"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/results/schema"
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

// sessionStats roll sessions up for summary.json: counts by outcome and
// the duration of complete sessions. A session is OK when every call was
// answered, failed when the server failed one (its cancelled dependents
// with it), cut when the generator cut one and none failed.
type sessionStats struct {
	Count, OK, Failed, Cut, CancelledCalls int64
	// Promised and PromisedOf sum the sessions' promised prefix tokens
	// and the prompt tokens they are of, over sessions whose trace gave
	// hash ids.
	Promised, PromisedOf int64
	Duration             *hdrhistogram.Histogram
	// TurnE2E is E2E per turn index of session calls, beside
	// Metrics.TurnTTFT.
	TurnE2E map[int]*hdrhistogram.Histogram
	roll    SessionRoller
}

func newSessionStats() *sessionStats {
	return &sessionStats{Duration: NewHistogram(), TurnE2E: map[int]*hdrhistogram.Histogram{}}
}

// add counts a record of a session call: its per-turn E2E, and once its
// session's last record arrives, the session.
func (s *sessionStats) add(r *Record) {
	if r.OK() && !r.Warmup {
		if d, ok := e2eOf(r); ok {
			turnHist(s.TurnE2E, r.Turn).RecordValue(microsOf(d))
		}
	}
	f, done := s.roll.Add(r)
	if !done {
		return
	}
	s.Count++
	s.CancelledCalls += int64(f.Cancelled)
	if f.PromisedOf > 0 {
		s.Promised += int64(f.Promised)
		s.PromisedOf += int64(f.PromisedOf)
	}
	switch f.Outcome() {
	case SessionFailed:
		s.Failed++
	case SessionCut:
		s.Cut++
	default:
		s.OK++
	}
	if d, ok := f.Duration(); ok && f.Complete() {
		s.Duration.RecordValue(microsOf(d))
	}
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

func turnHist(m map[int]*hdrhistogram.Histogram, turn int) *hdrhistogram.Histogram {
	h, ok := m[turn]
	if !ok {
		h = NewHistogram()
		m[turn] = h
	}
	return h
}

func (s *sessionStats) merge(o *sessionStats) {
	s.Count += o.Count
	s.OK += o.OK
	s.Failed += o.Failed
	s.Cut += o.Cut
	s.CancelledCalls += o.CancelledCalls
	s.Promised += o.Promised
	s.PromisedOf += o.PromisedOf
	s.Duration.Merge(o.Duration)
	for t, h := range o.TurnE2E {
		turnHist(s.TurnE2E, t).Merge(h)
	}
}

func (m *Metrics) sessionSummary() *schema.SessionSummary {
	s := m.Sessions
	if s == nil || s.Count == 0 {
		return nil
	}
	out := &schema.SessionSummary{Count: s.Count, OK: s.OK, Failed: s.Failed, Cut: s.Cut, CancelledCalls: s.CancelledCalls,
		DurationMs: schema.HistOf(s.Duration), Turns: map[string]map[string]schema.Hist{}}
	if s.PromisedOf > 0 {
		share := float64(s.Promised) / float64(s.PromisedOf)
		out.PromisedPrefixShare = &share
	}
	for name, in := range map[string]map[int]*hdrhistogram.Histogram{MetricTTFT: m.TurnTTFT, MetricE2E: s.TurnE2E} {
		first, later := NewHistogram(), NewHistogram()
		for t, h := range in {
			if t == 0 {
				first.Merge(h)
			} else {
				later.Merge(h)
			}
		}
		for key, h := range map[string]*hdrhistogram.Histogram{"0": first, "1+": later} {
			if h.TotalCount() == 0 {
				continue
			}
			if out.Turns[key] == nil {
				out.Turns[key] = map[string]schema.Hist{}
			}
			out.Turns[key][name] = schema.HistOf(h)
		}
	}
	return out
}

func (s *sessionStats) state() (*schema.SessionsState, error) {
	d, err := encodeHist(s.Duration)
	if err != nil {
		return nil, err
	}
	st := &schema.SessionsState{Count: s.Count, OK: s.OK, Failed: s.Failed, Cut: s.Cut, CancelledCalls: s.CancelledCalls, Duration: d,
		Promised: s.Promised, PromisedOf: s.PromisedOf}
	for t, h := range s.TurnE2E {
		if st.TurnE2E == nil {
			st.TurnE2E = map[string]string{}
		}
		if st.TurnE2E[strconv.Itoa(t)], err = encodeHist(h); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// sessionStatsOf rebuilds the sessionStats a state was taken of.
func sessionStatsOf(st *schema.SessionsState) (*sessionStats, error) {
	s := newSessionStats()
	s.Count, s.OK, s.Failed, s.Cut, s.CancelledCalls = st.Count, st.OK, st.Failed, st.Cut, st.CancelledCalls
	s.Promised, s.PromisedOf = st.Promised, st.PromisedOf
	var err error
	if s.Duration, err = decodeHist(st.Duration); err != nil {
		return nil, err
	}
	for k, e := range st.TurnE2E {
		t, err := strconv.Atoi(k)
		if err != nil {
			return nil, err
		}
		if s.TurnE2E[t], err = decodeHist(e); err != nil {
			return nil, err
		}
	}
	return s, nil
}
