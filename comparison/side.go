package comparison

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/internal/splitmix"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

// Side is one result read for comparison: its records by stage, and what
// it says about its plan, mix, load and changes.
type Side struct {
	Dir string
	// Stages holds each stage's measured records (warm-up left out): all
	// of them up to MaxRequests, else a uniform sample of MaxRequests;
	// Order the stage names by first appearance.
	Stages map[string][]loadgen.Record
	// Seen counts each stage's measured records, sampled or not.
	Seen  map[string]int
	Order []string
	// Load is each stage's load (summary.json run.load, and offered rate).
	Load map[string]Load
	// Classes counts measured requests per class, by stage.
	Classes map[string]map[string]int
	// PlanHash and MixHash are the evidence pack's input hashes ("" when
	// not an evidence pack).
	PlanHash, MixHash string
	Changes           []string
}

// Load is a stage's load, as its summary says.
type Load struct {
	Mode        string  `json:"mode"`
	Arrival     string  `json:"arrival,omitempty"`
	OfferedPerS float64 `json:"offered_per_s,omitempty"`
	// Levels are the stages' rates or concurrencies, durations left out
	// ("c16", "10,50").
	Levels string `json:"levels,omitempty"`
}

// MaxRequests is how many records per stage a Side keeps: beyond it a
// uniform sample (reservoir, seeded), so a long run compares in bounded
// memory and time; the intervals come from the sample and are wider for it.
const MaxRequests = 20000

// Read reads a run's or an acceptance run's results directory.
func Read(dir string) (*Side, error) {
	d := results.Dir(dir)
	s := &Side{Dir: dir, Stages: map[string][]loadgen.Record{}, Seen: map[string]int{}, Load: map[string]Load{}, Classes: map[string]map[string]int{}}
	// A validate's records are its stages'; ReadRunRecords reads them in turn.
	if _, err := d.ReadRunRecords(func(r *loadgen.Record) error {
		if r.Warmup {
			return nil
		}
		if _, ok := s.Stages[r.Stage]; !ok {
			s.Order = append(s.Order, r.Stage)
		}
		if s.Classes[r.Stage] == nil {
			s.Classes[r.Stage] = map[string]int{}
		}
		if r.ErrorKind != loadgen.ErrDropped {
			s.Classes[r.Stage][r.Class]++
		}
		s.Seen[r.Stage]++
		keep := len(s.Stages[r.Stage])
		if keep >= MaxRequests {
			// Algorithm R: record n replaces a kept one with chance MaxRequests/n.
			j := splitmix.Mix64(uint64(s.Seen[r.Stage])) % uint64(s.Seen[r.Stage])
			if j >= MaxRequests {
				return nil
			}
			keep = int(j)
		}
		c := *r
		c.Chunks = slices.Clone(r.Chunks)
		c.Text, c.Error = "", ""
		if keep == len(s.Stages[r.Stage]) {
			s.Stages[r.Stage] = append(s.Stages[r.Stage], c)
		} else {
			s.Stages[r.Stage][keep] = c
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(s.Order) == 0 {
		return nil, fmt.Errorf("%s: no measured requests", dir)
	}
	changes := map[string]bool{}
	addSummary := func(sum *results.Summary, stage string) {
		for _, c := range sum.Changes {
			changes[c] = true
		}
		l := Load{}
		if m, ok := sum.Run.Load["mode"].(string); ok {
			l.Mode = m
		}
		if a, ok := sum.Run.Load["arrival"].(string); ok {
			l.Arrival = a
		}
		if st, ok := sum.Run.Load["stages"].(string); ok {
			var lv []string
			for _, part := range strings.Split(st, ",") {
				lvl, _, _ := strings.Cut(part, "@")
				lv = append(lv, lvl)
			}
			l.Levels = strings.Join(lv, ",")
		}
		th := sum.Throughput
		if st, ok := sum.Stages[stage]; ok {
			th = st.Throughput
		}
		l.OfferedPerS = th.OfferedPerS
		s.Load[stage] = l
	}
	if sum, err := d.ReadSummary(); err == nil {
		for _, st := range s.Order {
			addSummary(sum, st)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, st := range s.Order {
		if sum, err := d.Stage(st).ReadSummary(); err == nil {
			addSummary(sum, st)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, evidence.EnvironmentFile)); err == nil {
		var env evidence.Environment
		if json.Unmarshal(b, &env) == nil {
			s.PlanHash, s.MixHash = env.Inputs["plan"].SHA256, env.Inputs["mix"].SHA256
		}
	}
	for c := range changes {
		s.Changes = append(s.Changes, c)
	}
	sort.Strings(s.Changes)
	return s, nil
}

// renameStage returns a copy of s whose stage from is named to (the
// records keep their own Stage: comparison reads them by map key).
func (s *Side) renameStage(from, to string) *Side {
	c := *s
	c.Order = slices.Clone(s.Order)
	for i, st := range c.Order {
		if st == from {
			c.Order[i] = to
		}
	}
	c.Stages, c.Seen, c.Load, c.Classes = renameKey(s.Stages, from, to), renameKey(s.Seen, from, to),
		renameKey(s.Load, from, to), renameKey(s.Classes, from, to)
	return &c
}

func renameKey[V any](m map[string]V, from, to string) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		if k == from {
			k = to
		}
		out[k] = v
	}
	return out
}
