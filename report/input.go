package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/tailgate-llm/tailgate/internal/splitmix"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// Kinds of results directory.
const (
	KindRun      = "run"
	KindValidate = "validate"
	KindSweep    = "sweep"
)

// Source is one results directory, read.
type Source struct {
	Dir  string
	Kind string
	// Parts are its runs in order: the run itself, each stage, each level.
	Parts   []*Part
	Verdict *slo.Report
	Sweep   *results.Sweep
}

// Part is one pipeline run: a run, a stage or a sweep level. Times are
// offset so the parts of a source follow one another.
type Part struct {
	Name    string
	Summary *results.Summary
	Offset  time.Duration
	Span    time.Duration
	Reqs    []req
	Tel     []telPoint
	// itl is a uniform sample of the part's ITL samples (ms), itlSeen
	// how many there were.
	itl     []float32
	itlSeen int64
}

// addITL keeps v in the reservoir (Algorithm R, seeded by the count so a
// report is reproducible).
func (p *Part) addITL(v float64) {
	p.itlSeen++
	if len(p.itl) < maxITLSamples {
		p.itl = append(p.itl, float32(v))
		return
	}
	if j := splitmix.Mix64(uint64(p.itlSeen)) % uint64(p.itlSeen); j < maxITLSamples {
		p.itl[j] = float32(v)
	}
}

// req is what the report needs of one measured record.
type req struct {
	class, stage   string
	intended, end  time.Duration // offset applied
	ok             bool
	ttft, e2e, tpt float64 // ms; tpt = TPOT, 0 when none
	tokens         int
}

// maxITLSamples bounds the ITL samples kept per part for the spectrum: a
// uniform reservoir beyond it (a long run streams millions of tokens), so
// the spectrum keeps its shape, p99.9 included, in bounded memory.
const maxITLSamples = 500_000

// telPoint is one telemetry sample: GPU utilisation (0–1), queue depth and
// the mean queue delay (ms) of requests admitted since the last sample.
type telPoint struct {
	t                     time.Duration // offset applied
	gpu, waiting, queueMs float64
	hasGPU, hasWaiting    bool
	hasQueue              bool
}

// Read reads dir: a sweep (sweep.json), an acceptance run (verdict.json
// and stages/) or a run (summary.json).
func Read(dir string) (*Source, error) {
	d := results.Dir(dir)
	s := &Source{Dir: dir}
	switch {
	case d.HasSweep():
		sw, err := d.ReadSweep()
		if err != nil {
			return nil, err
		}
		s.Kind, s.Sweep = KindSweep, sw
		for _, l := range sw.Levels {
			p, err := readPart(d.Level(l.Name), l.Name)
			if err != nil {
				return nil, err
			}
			s.Parts = append(s.Parts, p)
		}
		// Levels in the order they ran, one after another in time.
	case exists(d.Path(results.StagesDir)):
		s.Kind = KindValidate
		if b, err := os.ReadFile(d.Path(results.VerdictFile)); err == nil {
			var v slo.Report
			if err := json.Unmarshal(b, &v); err != nil {
				return nil, fmt.Errorf("%s: %w", d.Path(results.VerdictFile), err)
			}
			s.Verdict = &v
		}
		var names []string
		if s.Verdict != nil {
			for _, st := range s.Verdict.Stages {
				if !st.Manual && exists(string(d.Stage(st.Name))) {
					names = append(names, st.Name)
				}
			}
		} else {
			ents, _ := os.ReadDir(d.Path(results.StagesDir))
			for _, e := range ents {
				if e.IsDir() {
					names = append(names, e.Name())
				}
			}
		}
		for _, n := range names {
			p, err := readPart(d.Stage(n), n)
			if err != nil {
				return nil, err
			}
			s.Parts = append(s.Parts, p)
		}
	default:
		s.Kind = KindRun
		p, err := readPart(d, filepath.Base(filepath.Clean(dir)))
		if err != nil {
			return nil, err
		}
		if p.Summary != nil && p.Summary.SLO != nil {
			s.Verdict = p.Summary.SLO
		}
		s.Parts = append(s.Parts, p)
	}
	if len(s.Parts) == 0 {
		return nil, fmt.Errorf("%s: no run results (%s, %s/ or %s)", dir, results.SummaryFile, results.StagesDir, results.SweepFile)
	}
	var off time.Duration
	for _, p := range s.Parts {
		p.shift(off)
		off += p.Span
	}
	return s, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readPart reads one run directory.
func readPart(d results.Dir, name string) (*Part, error) {
	p := &Part{Name: name}
	sum, err := d.ReadSummary()
	switch {
	case err == nil:
		p.Summary = sum
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, err
	}
	itl, tpotMetric := measure.FindLatencyMetric(measure.MetricITL), measure.FindLatencyMetric(measure.MetricTPOT)
	if _, err := results.ReadRecords(d.Path(results.RecordsFile), func(r *loadgen.Record) error {
		p.Span = max(p.Span, r.End)
		if r.Warmup || r.ErrorKind == loadgen.ErrDropped {
			return nil
		}
		q := req{class: r.Class, stage: r.Stage, intended: r.Intended, end: r.End, ok: r.OK(), tokens: r.OutputTokens}
		if ttft, ok := r.TTFT(); q.ok && ok {
			q.ttft = ms(ttft)
			q.e2e = ms(r.E2E())
			if tpot, ok := tpotMetric.Of(r); ok {
				q.tpt = ms(tpot)
			}
			for s := itl.Samples(r); s.Next(); {
				for range s.Weight() {
					p.addITL(ms(s.Value()))
				}
			}
		}
		p.Reqs = append(p.Reqs, q)
		return nil
	}); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if p.Summary == nil && len(p.Reqs) == 0 {
		return nil, fmt.Errorf("%s: neither %s nor %s", d, results.SummaryFile, results.RecordsFile)
	}
	p.Tel, err = readTelemetry(d.Path(results.TelemetryFile))
	if err != nil {
		return nil, err
	}
	for _, t := range p.Tel {
		p.Span = max(p.Span, t.t)
	}
	return p, nil
}

// hasGPU reports whether any telemetry sample of the part had GPU
// utilisation.
func (p *Part) hasGPU() bool {
	for _, t := range p.Tel {
		if t.hasGPU {
			return true
		}
	}
	return false
}

func (p *Part) shift(off time.Duration) {
	p.Offset = off
	for i := range p.Reqs {
		p.Reqs[i].intended += off
		p.Reqs[i].end += off
	}
	for i := range p.Tel {
		p.Tel[i].t += off
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// readTelemetry reads telemetry.jsonl (nil when there is none).
func readTelemetry(path string) ([]telPoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []telPoint
	var prev *telemetry.Histogram
	line := 0
	for len(b) > 0 {
		var l []byte
		if i := indexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			l, b = b, nil
		}
		line++
		if len(l) == 0 {
			continue
		}
		var s telemetry.Sample
		if err := json.Unmarshal(l, &s); err != nil {
			if len(b) == 0 {
				break // a torn last line
			}
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		tp := telPoint{t: s.Elapsed}
		var sum float64
		n := 0
		if s.Server != nil {
			for _, g := range s.Server.GPUs {
				if g.Utilization != nil {
					sum += *g.Utilization
					n++
				}
			}
			if s.Server.Waiting != nil {
				tp.waiting, tp.hasWaiting = *s.Server.Waiting, true
			}
			if h := s.Server.QueueDelay; h != nil {
				if prev != nil && h.Count > prev.Count && h.Sum >= prev.Sum {
					tp.queueMs, tp.hasQueue = 1000*(h.Sum-prev.Sum)/float64(h.Count-prev.Count), true
				}
				prev = h
			}
		}
		if len(s.GPUs) > 0 { // local GPUs (NVML) win, as in the summary
			sum, n = 0, 0
			for _, g := range s.GPUs {
				if g.Utilization != nil {
					sum += *g.Utilization
					n++
				}
			}
		}
		if n > 0 {
			tp.gpu, tp.hasGPU = sum/float64(n), true
		}
		out = append(out, tp)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].t < out[j].t })
	return out, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
