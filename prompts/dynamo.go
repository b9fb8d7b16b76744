package prompts

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Dynamo's request trace, dynamo.request.trace.v1: one record per line,
// as the file sinks write it ({"timestamp": ms, "event": record}) or bare.
// request_end records are the calls; agent_context groups them into
// sessions (session_id) and lanes (trajectory_id, parent_trajectory_id);
// tool_start/tool_end/tool_error records mark a lane's tool round trips.
// Sequence hashes are rolling over the whole prefix, so one hash names
// one prefix anywhere in the trace.

type dynamoLine struct {
	Timestamp json.Number  `json:"timestamp"`
	Event     *dynamoEvent `json:"event"`
	dynamoEvent
}

type dynamoEvent struct {
	Schema    string      `json:"schema"`
	EventType string      `json:"event_type"`
	EventTime json.Number `json:"event_time_unix_ms"`
	Agent     *struct {
		SessionID    string `json:"session_id"`
		TrajectoryID string `json:"trajectory_id"`
		ParentTraj   string `json:"parent_trajectory_id"`
	} `json:"agent_context"`
	Request *struct {
		RequestID    string       `json:"request_id"`
		Model        string       `json:"model"`
		InputTokens  *json.Number `json:"input_tokens"`
		OutputTokens *json.Number `json:"output_tokens"`
		Received     json.Number  `json:"request_received_ms"`
		TotalTime    json.Number  `json:"total_time_ms"`
		Replay       *struct {
			BlockSize   int           `json:"trace_block_size"`
			InputLength *json.Number  `json:"input_length"`
			Hashes      []json.Number `json:"input_sequence_hashes"`
		} `json:"replay"`
	} `json:"request"`
	Tool *struct {
		DurationMs json.Number `json:"duration_ms"`
	} `json:"tool"`
}

type dynamoCall struct {
	gcall
	traj, parent string
	startMs      float64
	endMs        float64
}

type dynamoSession struct {
	line  int
	calls []dynamoCall
	tools map[string][]float64 // trajectory → tool event times (ms)
}

func msField(n json.Number) (float64, bool) {
	if n == "" {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func (m *Mix) loadDynamo(c *class) error {
	byID := map[string]*dynamoSession{}
	var order []string
	err := jsonDocs(c.path, func(file string, line int, raw json.RawMessage) error {
		var dl dynamoLine
		if err := decodeNumbers(raw, &dl); err != nil {
			return errAt(file, line, "", "not a dynamo.request.trace.v1 record: %v", err)
		}
		ev := &dl.dynamoEvent
		if dl.Event != nil {
			ev = dl.Event
		}
		if ev.Schema != "" && ev.Schema != "dynamo.request.trace.v1" {
			return errAt(file, line, "schema", "%q: want dynamo.request.trace.v1", ev.Schema)
		}
		switch ev.EventType {
		case "request_end", "tool_start", "tool_end", "tool_error":
		default:
			return nil // request_payload and others carry no timing we replay
		}
		if ev.Agent == nil || ev.Agent.SessionID == "" {
			return errAt(file, line, "agent_context.session_id", "missing: a session replay needs every record's agent_context")
		}
		ds := byID[ev.Agent.SessionID]
		if ds == nil {
			ds = &dynamoSession{line: line, tools: map[string][]float64{}}
			byID[ev.Agent.SessionID] = ds
			order = append(order, ev.Agent.SessionID)
		}
		at, ok := msField(ev.EventTime)
		if !ok {
			return errAt(file, line, "event_time_unix_ms", "missing or not a number")
		}
		if ev.EventType != "request_end" {
			ds.tools[ev.Agent.TrajectoryID] = append(ds.tools[ev.Agent.TrajectoryID], at)
			return nil
		}
		rq := ev.Request
		if rq == nil {
			return errAt(file, line, "request", "missing")
		}
		dc := dynamoCall{traj: ev.Agent.TrajectoryID, parent: ev.Agent.ParentTraj, endMs: at}
		dc.id, dc.line, dc.model = rq.RequestID, line, rq.Model
		if dc.id == "" {
			dc.id = "r" + strconv.Itoa(len(ds.calls))
		}
		if dc.startMs, ok = msField(rq.Received); !ok {
			tt, ok := msField(rq.TotalTime)
			if !ok {
				return errAt(file, line, "request.request_received_ms", "missing (and no total_time_ms)")
			}
			dc.startMs = at - tt
		}
		in := rq.InputTokens
		if rp := rq.Replay; rp != nil {
			if in == nil {
				in = rp.InputLength
			}
			var msg string
			if dc.hashes, msg = hashList(rp.Hashes); msg != "" {
				return errAt(file, line, "request.replay.input_sequence_hashes", "%s", msg)
			}
			if rp.BlockSize < 0 || rp.BlockSize > 1<<16 {
				return errAt(file, line, "request.replay.trace_block_size", "%d: want 1 to 65536", rp.BlockSize)
			}
			if rp.BlockSize > 0 {
				dc.endNs = int64(rp.BlockSize) // block size, moved to the session below
			}
		}
		for _, f := range []struct {
			name string
			n    *json.Number
			dst  *int
		}{{"request.input_tokens", in, &dc.in}, {"request.output_tokens", rq.OutputTokens, &dc.out}} {
			if f.n == nil {
				return missingAt(file, line, f.name)
			}
			v, msg := wholeJSON(json.RawMessage(f.n.String()))
			if msg != "" {
				return errAt(file, line, f.name, "%s", msg)
			}
			*f.dst = v
		}
		ds.calls = append(ds.calls, dc)
		return nil
	})
	if err != nil {
		return err
	}
	var ss []*gsession
	for _, id := range order {
		s, err := dynamoGraph(c.path, id, byID[id])
		if err != nil {
			return err
		}
		if s != nil {
			ss = append(ss, s)
		}
	}
	return m.finishSessions(c, ss)
}

// dynamoGraph orders a session's calls by their start and links them:
// a lane's calls one after another (a tool gap where a tool event lies
// between them), a child lane's first call to the parent call running
// when it started (on its start) or ended before it (on its end), and a
// child's last call joined by the parent's first call after it ended; a
// child nobody joins is a background lane.
func dynamoGraph(file, id string, ds *dynamoSession) (*gsession, error) {
	if len(ds.calls) == 0 {
		return nil, nil
	}
	calls := ds.calls
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].startMs < calls[j].startMs })
	t0 := calls[0].startMs
	s := &gsession{id: id, line: ds.line, global: true, blockSize: 64, startNs: int64(t0 * 1e6)}
	lanes := map[string][]int{}
	main := calls[0].traj
	for i := range calls {
		if bs := calls[i].endNs; bs > 0 {
			s.blockSize = int(bs)
		}
		lanes[calls[i].traj] = append(lanes[calls[i].traj], i)
	}
	ns := func(ms float64) int64 { return int64(ms * 1e6) }
	gap := func(a, b float64) time.Duration { return max(0, time.Duration(ns(b)-ns(a))) }
	joined := map[string]bool{}
	for i := range calls {
		cl := &calls[i]
		cl.startNs, cl.endNs = ns(cl.startMs-t0), ns(cl.endMs-t0)
		if cl.traj != main {
			cl.agent = cl.traj
		}
		lane := lanes[cl.traj]
		pos := sort.SearchInts(lane, i)
		switch {
		case pos > 0:
			p := &calls[lane[pos-1]]
			tool := false
			for _, t := range ds.tools[cl.traj] {
				if t >= p.endMs && t <= cl.startMs {
					tool = true
				}
			}
			cl.after = append(cl.after, Edge{From: lane[pos-1], On: OnEnd, Delay: gap(p.endMs, cl.startMs), Tool: tool})
		case cl.parent != "" && len(lanes[cl.parent]) > 0:
			q := -1
			for _, j := range lanes[cl.parent] {
				if j < i && calls[j].startMs <= cl.startMs {
					q = j
				}
			}
			if q < 0 {
				return nil, errAt(file, cl.line, "agent_context.parent_trajectory_id", "session %q: lane %q starts before any call of its parent %q", id, cl.traj, cl.parent)
			}
			if cl.startMs < calls[q].endMs {
				cl.after = append(cl.after, Edge{From: q, On: OnStart, Delay: gap(calls[q].startMs, cl.startMs)})
			} else {
				cl.after = append(cl.after, Edge{From: q, On: OnEnd, Delay: gap(calls[q].endMs, cl.startMs)})
			}
		case i > 0:
			cl.offset = gap(t0, cl.startMs)
		}
		// Join every child lane that ended before this call started.
		if pos > 0 {
			for traj, cl2 := range lanes {
				last := cl2[len(cl2)-1]
				if joined[traj] || calls[cl2[0]].parent != cl.traj || last >= i || calls[last].endMs > cl.startMs {
					continue
				}
				joined[traj] = true
				cl.after = append(cl.after, Edge{From: last, On: OnEnd, Delay: gap(calls[last].endMs, cl.startMs)})
			}
			sort.Slice(cl.after[1:], func(a, b int) bool { return cl.after[1+a].From < cl.after[1+b].From })
		}
	}
	for i := range calls {
		cl := calls[i].gcall
		if cl.agent != "" && !dynamoJoined(calls, joined, calls[i].traj) {
			cl.background = true
		}
		s.calls = append(s.calls, cl)
	}
	laneTurns(s.calls)
	if len(s.calls[0].after) != 0 {
		return nil, fmt.Errorf("dynamo session %q: first call waits for another", id)
	}
	return s, nil
}

// dynamoJoined: a lane gates its parent when it and every lane above
// it (the main lane aside) are joined.
func dynamoJoined(calls []dynamoCall, joined map[string]bool, traj string) bool {
	main := calls[0].traj
	for depth := 0; traj != "" && traj != main && depth < 64; depth++ {
		if !joined[traj] {
			return false
		}
		parent := ""
		for i := range calls {
			if calls[i].traj == traj {
				parent = calls[i].parent
				break
			}
		}
		traj = parent
	}
	return true
}
