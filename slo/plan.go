package slo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// Plan is an acceptance plan (kind: Plan): what to test, against which SLO
// and mix, and the stages to run in order.
type Plan struct {
	Name        string
	Description string
	// Target is the base URL as written, ${NAME} environment references
	// included (TargetURL expands them); it never holds a credential.
	Target string
	API    string // protocol ("" = the tool's default)
	Model  string
	// SLOPath and MixPath are as written; Resolve makes them relative to
	// the plan file.
	SLOPath string
	MixPath string
	Seed    uint64
	// Validity bounds beyond which the run itself is invalid (exit 3).
	Validity Validity
	Stages   []Stage
	Waivers  []Waiver
	File     string
	// SLO is the spec LoadPlan read from SLOPath.
	SLO *Spec

	sloLine, targetLine int
}

// Stage is one acceptance test: a load held for a duration, or a manual
// test whose result a person records.
type Stage struct {
	Name        string
	Description string
	// Rate (requests/s, open loop) or Concurrency (closed loop).
	Rate        float64
	Concurrency int
	Duration    time.Duration
	// Warmup is the stage's first stretch, sent but left out of verdicts.
	Warmup time.Duration
	// Arrival is the open-loop process: constant, poisson or gamma (""
	// leaves it to the engine: constant); Burstiness the gamma shape.
	Arrival    string
	Burstiness float64
	// Objectives lists the objectives judged on this stage; nil means all.
	Objectives []string
	// Manual stages are not run: a person records pass or fail
	// (tailgate validate --record STAGE=pass --by NAME).
	Manual bool
	Line   int
}

// Applies reports whether objective is judged on the stage.
func (s *Stage) Applies(objective string) bool {
	if s.Objectives == nil {
		return true
	}
	for _, o := range s.Objectives {
		if o == objective {
			return true
		}
	}
	return false
}

// Arrival processes a stage may name.
const (
	ArrivalConstant = "constant"
	ArrivalPoisson  = "poisson"
	ArrivalGamma    = "gamma"
)

// Resolve returns path relative to the plan file's directory (absolute
// paths are kept).
func (p *Plan) Resolve(path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(filepath.Dir(p.File), path)
}

// Stage returns the stage named name.
func (p *Plan) Stage(name string) (*Stage, bool) {
	for i := range p.Stages {
		if p.Stages[i].Name == name {
			return &p.Stages[i], true
		}
	}
	return nil, false
}

// AllWaivers are the SLO's waivers and the plan's.
func (p *Plan) AllWaivers() []Waiver {
	var w []Waiver
	if p.SLO != nil {
		w = append(w, p.SLO.Waivers...)
	}
	return append(w, p.Waivers...)
}

// LoadPlan reads a plan file and the SLO file it names, and checks that
// every objective and waiver the plan names exists.
func LoadPlan(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePlan(path, data)
	if err != nil {
		return nil, err
	}
	spec, err := LoadSpec(p.Resolve(p.SLOPath))
	if err != nil {
		var es Errors
		if errors.As(err, &es) {
			return nil, err
		}
		return nil, &Error{File: path, Line: p.sloLine, Field: "slo", Err: err}
	}
	if err := p.Check(spec); err != nil {
		return nil, err
	}
	p.SLO = spec
	return p, nil
}

// Check cross-checks the plan against spec: stage objectives and waiver
// objectives must exist in it, waiver stages in the plan.
func (p *Plan) Check(spec *Spec) error {
	var errs Errors
	add := func(line int, field, format string, a ...any) {
		errs = append(errs, &Error{File: p.File, Line: line, Field: field, Err: fmt.Errorf(format, a...)})
	}
	for i, s := range p.Stages {
		for j, o := range s.Objectives {
			if _, ok := spec.Objective(o); !ok {
				add(s.Line, yamlwalk.Index(yamlwalk.Index("stages", i)+".objectives", j), "%q is not an objective of %s", o, spec.File)
			}
		}
	}
	check := func(file string, ws []Waiver, key string) {
		for i, w := range ws {
			if w.Objective != string(ManualResult) {
				if _, ok := spec.Objective(w.Objective); !ok {
					errs = append(errs, &Error{File: file, Line: w.Line, Field: yamlwalk.Index(key, i) + ".objective",
						Err: fmt.Errorf("%q is not an objective of %s", w.Objective, spec.File)})
				}
			}
			if w.Stage != "" {
				st, ok := p.Stage(w.Stage)
				switch {
				case !ok:
					errs = append(errs, &Error{File: file, Line: w.Line, Field: yamlwalk.Index(key, i) + ".stage",
						Err: fmt.Errorf("%q is not a stage of %s", w.Stage, p.File)})
				case w.Objective == string(ManualResult) && !st.Manual:
					errs = append(errs, &Error{File: file, Line: w.Line, Field: yamlwalk.Index(key, i) + ".stage",
						Err: fmt.Errorf("%q is not a manual stage", w.Stage)})
				}
			}
		}
	}
	check(p.File, p.Waivers, "waivers")
	check(spec.File, spec.Waivers, "waivers")
	if len(errs) > 0 {
		errs.Sort()
		return errs
	}
	return nil
}

// ParsePlan parses a plan file's bytes; it does not read the SLO file.
func ParsePlan(file string, data []byte) (*Plan, error) {
	doc, root := yamlwalk.Parse(file, data)
	p := reader{doc: doc}.plan(root)
	if err := doc.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

func (r reader) plan(root yamlwalk.Node) *Plan {
	f, ok := r.top(root, "Plan", "name", "description", "target", "api", "model",
		"slo", "mix", "seed", "validity", "stages", "waivers")
	if !ok {
		return nil
	}
	p := &Plan{File: r.doc.File(), Validity: defaultValidityTable}
	p.Name = required(f, "name", name)
	p.Description = optional(f, "description", text)
	if n, ok := f.Require("target"); ok {
		var ok bool
		if p.Target, ok = n.Text(); ok {
			if msg := checkTarget(p.Target); msg != "" {
				f.Errorf("target", "%s", msg)
			}
		}
		p.targetLine = f.KeyLine("target")
	}
	p.API = optional(f, "api", text)
	p.Model = required(f, "model", text)
	p.SLOPath = required(f, "slo", text)
	p.sloLine = f.KeyLine("slo")
	p.MixPath = required(f, "mix", text)
	if n, ok := f.Get("seed"); ok {
		seed, _ := whole(n)
		p.Seed = uint64(seed)
	}
	if n, ok := f.Get("validity"); ok {
		p.Validity = r.validity(n)
	}
	seen := map[string]int{}
	for i, n := range items(f, "stages", "a plan needs at least one stage") {
		s, ok := r.stage(n)
		if !ok {
			continue
		}
		if first, dup := seen[s.Name]; dup {
			r.duplicateName(n, "stages", s.Name, first)
			continue
		}
		seen[s.Name] = i
		p.Stages = append(p.Stages, s)
	}
	p.Waivers = r.waivers(f)
	return p
}

func (r reader) validity(n yamlwalk.Node) Validity {
	f, _ := n.Map("max_error_rate", "max_dropped", "max_cut_at_end", "max_context_length", "max_distortion", "max_schedule_lag", "max_client_cpu")
	v := defaultValidityTable
	for _, b := range []struct {
		key string
		dst *Decimal
	}{{"max_error_rate", &v.MaxErrorRate}, {"max_dropped", &v.MaxDropped}, {"max_cut_at_end", &v.MaxCutAtEnd}, {"max_context_length", &v.MaxContextLength},
		{"max_distortion", &v.MaxDistortion}, {"max_client_cpu", &v.MaxClientCPU}} {
		if n, ok := f.Get(b.key); ok {
			if x, ok := decimal(n); ok {
				if x.CmpRatio(1, 1) < 0 {
					f.Errorf(b.key, "%s is above 100%%", x)
				}
				*b.dst = x
			}
		}
	}
	if n, ok := f.Get("max_schedule_lag"); ok {
		if x, ok := n.Duration(); ok {
			v.MaxScheduleLag = x
		}
	}
	return v
}

func (r reader) stage(n yamlwalk.Node) (Stage, bool) {
	start := r.doc.Count()
	f, _ := n.Map("name", "description", "rate", "concurrency", "duration", "warmup",
		"arrival", "burstiness", "objectives", "manual")
	s := Stage{Line: n.Line()}
	if !n.IsMap() {
		return s, false
	}
	s.Name = required(f, "name", name)
	s.Description = optional(f, "description", text)
	if v, ok := f.Get("manual"); ok {
		s.Manual, _ = v.Bool()
	}
	if s.Manual {
		for _, k := range []string{"rate", "concurrency", "duration", "warmup", "arrival", "burstiness", "objectives"} {
			if f.Has(k) {
				f.Errorf(k, "a manual stage is not run: it takes only name, description and manual")
			}
		}
		return s, r.clean(start)
	}
	rate, hasRate := f.Get("rate")
	conc, hasConc := f.Get("concurrency")
	switch {
	case hasRate && hasConc:
		f.Errorf("concurrency", "give rate (open loop) or concurrency (closed loop), not both")
	case hasRate:
		if v, ok := decimal(rate); ok {
			if v.Float() <= 0 {
				f.Errorf("rate", "must be > 0 requests per second")
			}
			s.Rate = v.Float()
		}
	case hasConc:
		if c, ok := whole(conc); ok {
			if c < 1 {
				f.Errorf("concurrency", "must be ≥ 1")
			}
			s.Concurrency = c
		}
	default:
		rate.Errorf("required: give rate (requests/s) or concurrency, or manual: true")
	}
	if v, ok := f.Require("duration"); ok {
		if d, ok := v.Duration(); ok {
			if d <= 0 {
				f.Errorf("duration", "must be > 0")
			}
			s.Duration = d
		}
	}
	if v, ok := f.Get("warmup"); ok {
		if d, ok := v.Duration(); ok {
			if s.Duration > 0 && d >= s.Duration {
				f.Errorf("warmup", "%s leaves nothing of the %s stage to measure", d, s.Duration)
			}
			s.Warmup = d
		}
	}
	if v, ok := f.Get("arrival"); ok {
		s.Arrival = text(v)
		switch s.Arrival {
		case ArrivalConstant, ArrivalPoisson, ArrivalGamma:
		default:
			f.Errorf("arrival", "%q: want constant, poisson or gamma", s.Arrival)
		}
		if s.Concurrency > 0 {
			f.Errorf("arrival", "a closed-loop (concurrency) stage has no arrival process")
		}
	}
	if v, ok := f.Get("burstiness"); ok {
		if b, ok := decimal(v); ok {
			if b.Float() <= 0 {
				f.Errorf("burstiness", "must be > 0 (1 is Poisson, below 1 burstier)")
			}
			s.Burstiness = b.Float()
		}
		if s.Arrival != ArrivalGamma {
			f.Errorf("burstiness", "only gamma arrivals take burstiness: add arrival: gamma")
		}
	} else if s.Arrival == ArrivalGamma {
		s.Burstiness = 1
	}
	if v, ok := f.Get("objectives"); ok {
		if v.IsScalar() && v.Yaml().Value == "all" {
			s.Objectives = nil
		} else {
			s.Objectives = []string{}
			for _, o := range names(v) {
				s.Objectives = append(s.Objectives, o.Yaml().Value)
			}
			if len(s.Objectives) == 0 {
				f.Errorf("objectives", "empty: list objective names, or write all")
			}
		}
	}
	return s, r.clean(start)
}
