package measure

import (
	"strconv"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results/schema"
)

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
	roll    loadgen.SessionRoller
}

func newSessionStats() *sessionStats {
	return &sessionStats{Duration: NewHistogram(), TurnE2E: map[int]*hdrhistogram.Histogram{}}
}

// add counts a record of a session call: its per-turn E2E, and once its
// session's last record arrives, the session.
func (s *sessionStats) add(r *loadgen.Record) {
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
	case loadgen.SessionFailed:
		s.Failed++
	case loadgen.SessionCut:
		s.Cut++
	default:
		s.OK++
	}
	if d, ok := f.Duration(); ok && f.Complete() {
		s.Duration.RecordValue(microsOf(d))
	}
}

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
