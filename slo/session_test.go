package slo

import (
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// session is a two-call agent session read back from requests.jsonl:
// call a at start, call b after it; dur is b's end from a's intended start.
func session(id string, start, dur time.Duration, bKind loadgen.ErrorKind) []loadgen.Record {
	a := okRec("s", start, 20*ms1, 100*ms1, 4)
	a.Session, a.Call, a.Turn = id, "a", 0
	b := okRec("s", start+100*ms1, 30*ms1, dur-100*ms1, 4)
	b.Session, b.Call, b.Turn, b.After, b.SessionLast = id, "b", 1, []string{"a"}, true
	if bKind != loadgen.ErrNone {
		b.ErrorKind, b.Error, b.Chunks, b.OutputTokens = bKind, string(bKind), nil, 0
	}
	return []loadgen.Record{a, b}
}

func TestSessionObjectives(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `
kind: SLO
name: agents
owner: o
objectives:
  - {name: sessions-fast, metric: session_duration, threshold: 1s, target: 75%}
  - {name: sessions-ok, metric: session_success, threshold: 30%}
  - {name: first-ttft, metric: ttft, turn: first, threshold: 25ms, target: 100%}
  - {name: later-ttft, metric: ttft, turn: later, threshold: 25ms, target: 100%}
  - {name: errors, metric: error_rate, threshold: 50%}
`)
	var recs []loadgen.Record
	recs = append(recs, session("s1", 0, 500*ms1, loadgen.ErrNone)...)
	recs = append(recs, session("s2", 10*ms1, 800*ms1, loadgen.ErrNone)...)
	recs = append(recs, session("s3", 20*ms1, 900*ms1, loadgen.ErrNone)...)
	recs = append(recs, session("s4", 30*ms1, 1500*ms1, loadgen.ErrNone)...)  // too slow
	recs = append(recs, session("s5", 40*ms1, 600*ms1, loadgen.ErrServer)...) // failed
	recs = append(recs, session("s6", 50*ms1, 400*ms1, loadgen.ErrCutAtEnd)...)
	// A request of no session: no turn selects it.
	recs = append(recs, okRec("s", 60*ms1, 90*ms1, 100*ms1, 2))
	got := map[string]Verdict{}
	for _, v := range judgeStage(spec, "s", recs, Input{Now: t0}) {
		got[v.Objective] = v
	}
	// Four sessions decide little at the default confidence: the counts
	// are what is asserted, and that nothing FAILs at 3 of 4 for 75%.
	if v := got["sessions-fast"]; v.Good != 3 || v.Total != 4 || v.Censored != 1 || v.Result == Fail {
		t.Errorf("session_duration: good %d of %d, censored %d, %s (%s); want 3 of 4, 1 censored, not FAIL", v.Good, v.Total, v.Censored, v.Result, v.Note)
	} else if !strings.Contains(v.Note, "1 failed sessions") {
		t.Errorf("session_duration note %q does not say the failed session is left out", v.Note)
	}
	if v := got["sessions-ok"]; v.Good != 4 || v.Total != 5 || v.Result == Fail {
		t.Errorf("session_success: good %d of %d, %s (%s); want 4 of 5 (s6 cut, left out), not FAIL", v.Good, v.Total, v.Result, v.Note)
	}
	if v := got["first-ttft"]; v.Total != 6 || v.Good != 6 {
		t.Errorf("turn first: %d of %d good; want 6 of 6 (one per session, 20ms each)", v.Good, v.Total)
	}
	if v := got["later-ttft"]; v.Total != 5 || v.Good != 0 || v.Result != Fail {
		t.Errorf("turn later: %d of %d good, %s; want 0 of 5 (30ms each, and s6's cut past 25ms), FAIL", v.Good, v.Total, v.Result)
	}
}

func TestSessionObjectiveSpecErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ y, want string }{
		{`{name: x, metric: session_duration, class: a, threshold: 1s, target: 90%}`, "judges whole sessions"},
		{`{name: x, metric: ttft, turn: third, threshold: 1s, target: 90%}`, `"third" is not a turn`},
		{`{name: x, metric: session_success, turn: first, threshold: 1%}`, "only call-level objectives"},
	} {
		_, err := ParseSpec("slo.yaml", []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - "+c.y+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.y, err, c.want)
		}
	}
}
