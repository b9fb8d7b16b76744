package prompts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The SemiAnalysis/Weka cc-traces format: one JSON object per agent
// session ({id, block_size, hash_id_scope, requests[]}), requests of type
// "n" or "s" (a call) or "subagent" (a nested lane with its own requests,
// joined by the parent's next call unless its status is async_launched).
// A path is one trace, a JSONL of traces, or a directory of them.

type wekaTrace struct {
	ID          string    `json:"id"`
	BlockSize   *int      `json:"block_size"`
	HashIDScope string    `json:"hash_id_scope"`
	Requests    []wekaReq `json:"requests"`
}

type wekaReq struct {
	T         *float64      `json:"t"`
	Type      string        `json:"type"`
	Model     string        `json:"model"`
	In        *float64      `json:"in"`
	Out       *float64      `json:"out"`
	HashIDs   []json.Number `json:"hash_ids"`
	Stop      string        `json:"stop"`
	APITime   *float64      `json:"api_time"`
	ThinkTime *float64      `json:"think_time"`
	AgentID   string        `json:"agent_id"`
	Status    string        `json:"status"`
	Requests  []wekaReq     `json:"requests"`
}

// jsonDocs calls doc for every JSON value in the files at path (a file
// holding one value or a JSONL of them, or a directory of *.json and
// *.jsonl files, in name order), with the file and the value's line.
func jsonDocs(path string, doc func(file string, line int, raw json.RawMessage) error) error {
	files := []string{path}
	if fi, err := os.Stat(path); err != nil {
		return &Error{File: path, Err: err}
	} else if fi.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return &Error{File: path, Err: err}
		}
		files = files[:0]
		for _, e := range ents {
			if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".jsonl")) {
				files = append(files, filepath.Join(path, n))
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return &Error{File: path, Err: fmt.Errorf("no .json or .jsonl files in the directory")}
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return &Error{File: f, Err: err}
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		for {
			off := dec.InputOffset()
			var raw json.RawMessage
			err := dec.Decode(&raw)
			// The value starts after the whitespace before it.
			start := int(off)
			for start < len(data) && (data[start] == ' ' || data[start] == '\n' || data[start] == '\r' || data[start] == '\t') {
				start++
			}
			line := 1 + bytes.Count(data[:start], []byte{'\n'})
			if err == io.EOF {
				break
			}
			if err != nil {
				return errAt(f, line, "", "not JSON: %v", err)
			}
			if err := doc(f, line, raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeNumbers decodes raw into v with numbers kept exact.
func decodeNumbers(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// hashList reads hash ids as uint64 (exact above 2^53; a negative id is
// taken as its two's complement).
func hashList(ns []json.Number) ([]uint64, string) {
	if len(ns) == 0 {
		return nil, ""
	}
	out := make([]uint64, len(ns))
	for i, n := range ns {
		u, err := strconv.ParseUint(n.String(), 10, 64)
		if err != nil {
			v, ierr := strconv.ParseInt(n.String(), 10, 64)
			if ierr != nil {
				return nil, fmt.Sprintf("id %d: %q is not a whole number of 64 bits", i, n.String())
			}
			u = uint64(v)
		}
		out[i] = u
	}
	return out, ""
}

func secondsDur(f float64) time.Duration { return time.Duration(math.Round(f * 1e9)) }

func (m *Mix) loadWeka(c *class) error {
	var ss []*gsession
	err := jsonDocs(c.path, func(file string, line int, raw json.RawMessage) error {
		var t wekaTrace
		if err := decodeNumbers(raw, &t); err != nil {
			return errAt(file, line, "", "not a cc-traces trace: %v", err)
		}
		s, err := wekaSession(file, line, &t, len(ss))
		if err != nil {
			return err
		}
		ss = append(ss, s)
		return nil
	})
	if err != nil {
		return err
	}
	return m.finishSessions(c, ss)
}

func wekaSession(file string, line int, t *wekaTrace, idx int) (*gsession, error) {
	s := &gsession{id: t.ID, line: line, blockSize: 64}
	if s.id == "" {
		s.id = "trace" + strconv.Itoa(idx)
	}
	if t.BlockSize != nil {
		if *t.BlockSize < 1 || *t.BlockSize > 1<<16 {
			return nil, errAt(file, line, "block_size", "%d: want 1 to 65536", *t.BlockSize)
		}
		s.blockSize = *t.BlockSize
	}
	switch t.HashIDScope {
	case "local":
	case "global", "":
		// As guidellm: an omitted scope is corpus-wide.
		s.global = true
	default:
		return nil, errAt(file, line, "hash_id_scope", "%q: want local or global", t.HashIDScope)
	}
	if len(t.Requests) == 0 {
		return nil, errAt(file, line, "requests", "trace %q has no requests", s.id)
	}
	w := wekaWalk{file: file, line: line, s: s}
	if _, err := w.lane(t.Requests, "", false, 0, -1, "requests"); err != nil {
		return nil, err
	}
	if len(s.calls) == 0 {
		return nil, errAt(file, line, "requests", "trace %q has no calls", s.id)
	}
	laneTurns(s.calls)
	return s, nil
}

type wekaWalk struct {
	file string
	line int
	s    *gsession
	stop []string // per call: its recorded stop reason
}

func (w *wekaWalk) errf(field, format string, args ...any) error {
	return errAt(w.file, w.line, field, "trace %q: %s", w.s.id, fmt.Sprintf(format, args...))
}

// lane adds the calls of one agent's requests and returns the index of
// its last call (-1 if none). parent is the call that spawned the lane.
func (w *wekaWalk) lane(reqs []wekaReq, agent string, background bool, spawnT float64, parent int, path string) (int, error) {
	prev := -1
	var pending []int // last calls of joined subagents since prev
	n := 0
	for i := range reqs {
		rq := &reqs[i]
		field := fmt.Sprintf("%s[%d]", path, i)
		if rq.T == nil {
			return 0, w.errf(field+".t", "missing")
		}
		t := *rq.T
		if agent != "" && t < spawnT {
			// Inner times are relative to the spawn when they are smaller.
			t += spawnT
		}
		switch rq.Type {
		case "n", "s":
			if rq.In == nil || rq.Out == nil {
				return 0, w.errf(field, "in and out are required")
			}
			in, out := *rq.In, *rq.Out
			if in != math.Trunc(in) || in < 0 || in > tokenLimit || out != math.Trunc(out) || out < 0 || out > tokenLimit {
				return 0, w.errf(field, "in %v, out %v: want whole numbers in [0, %d]", in, out, tokenLimit)
			}
			hashes, msg := hashList(rq.HashIDs)
			if msg != "" {
				return 0, w.errf(field+".hash_ids", "%s", msg)
			}
			id := strconv.Itoa(n)
			if agent != "" {
				id = agent + "." + id
			}
			n++
			api := 0.0
			if rq.APITime != nil {
				api = max(0, *rq.APITime)
			}
			cl := gcall{
				id: id, line: w.line, startNs: int64(secondsDur(t)), endNs: int64(secondsDur(t + api)),
				in: int(in), out: int(out), hashes: hashes, model: rq.Model, agent: agent, background: background,
			}
			switch {
			case prev >= 0:
				p := &w.s.calls[prev]
				d := time.Duration(cl.startNs - p.endNs)
				if rq.ThinkTime != nil {
					d = secondsDur(*rq.ThinkTime)
				}
				cl.after = append(cl.after, Edge{From: prev, On: OnEnd, Delay: max(0, d), Tool: w.stop[prev] == "tool_use"})
			case parent >= 0:
				p := &w.s.calls[parent]
				cl.after = append(cl.after, Edge{From: parent, On: OnEnd, Delay: max(0, time.Duration(cl.startNs-p.endNs))})
			default:
				cl.offset = max(0, time.Duration(cl.startNs))
			}
			for _, j := range pending {
				cl.after = append(cl.after, Edge{From: j, On: OnEnd})
			}
			pending = nil
			prev = len(w.s.calls)
			w.s.calls = append(w.s.calls, cl)
			w.stop = append(w.stop, rq.Stop)
		case "subagent":
			if rq.AgentID == "" {
				return 0, w.errf(field+".agent_id", "missing")
			}
			bg := background || rq.Status == "async_launched"
			from := prev
			if from < 0 {
				from = parent
			}
			last, err := w.lane(rq.Requests, rq.AgentID, bg, t, from, field+".requests")
			if err != nil {
				return 0, err
			}
			if !bg && last >= 0 {
				pending = append(pending, last)
			}
		default:
			return 0, w.errf(field+".type", "%q: want n, s or subagent", rq.Type)
		}
	}
	return prev, nil
}
