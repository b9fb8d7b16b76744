package slo

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"
)

// Plan is an acceptance plan (kind: Plan): what to test, against which SLO
// and mix, and the stages to run in order.
type Plan struct {
	Name        string
	Description string
	Target      string // base URL
	API         string // protocol ("" = the tool's default)
	Model       string
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

	sloLine int
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

// Validity bounds the run itself. Beyond them the run is invalid (exit 3)
// whatever the objectives say: the numbers would not describe the server.
type Validity struct {
	// MaxErrorRate: more failed requests than this (of a stage's requests)
	// and latency figures describe too few requests (default 50%).
	MaxErrorRate Decimal
	// MaxDropped: more dropped requests than this and the load generator
	// could not keep the schedule (default 1%).
	MaxDropped Decimal
	// MaxScheduleLag: the 99th-percentile send lateness above which the
	// load generator was the bottleneck (default 50ms, open loop only).
	MaxScheduleLag time.Duration
	// MaxClientCPU: the load generator's CPU use (0–1 of all cores) above
	// which it was the bottleneck (default 90%).
	MaxClientCPU Decimal
}

// DefaultValidity is used for bounds a plan leaves out.
var DefaultValidity = Validity{
	MaxErrorRate:   MustDecimal("50%"),
	MaxDropped:     MustDecimal("1%"),
	MaxScheduleLag: 50 * time.Millisecond,
	MaxClientCPU:   MustDecimal("90%"),
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
				add(s.Line, index(index("stages", i)+".objectives", j), "%q is not an objective of %s", o, spec.File)
			}
		}
	}
	check := func(file string, ws []Waiver, key string) {
		for i, w := range ws {
			if w.Objective != string(ManualResult) {
				if _, ok := spec.Objective(w.Objective); !ok {
					errs = append(errs, &Error{File: file, Line: w.Line, Field: index(key, i) + ".objective",
						Err: fmt.Errorf("%q is not an objective of %s", w.Objective, spec.File)})
				}
			}
			if w.Stage != "" {
				st, ok := p.Stage(w.Stage)
				switch {
				case !ok:
					errs = append(errs, &Error{File: file, Line: w.Line, Field: index(key, i) + ".stage",
						Err: fmt.Errorf("%q is not a stage of %s", w.Stage, p.File)})
				case w.Objective == string(ManualResult) && !st.Manual:
					errs = append(errs, &Error{File: file, Line: w.Line, Field: index(key, i) + ".stage",
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
	d := &decoder{file: file}
	root := d.parseDocument(data)
	if root == nil {
		return nil, d.errs
	}
	p := d.plan(root)
	if len(d.errs) > 0 {
		d.errs.Sort()
		return nil, d.errs
	}
	return p, nil
}

func (d *decoder) plan(root *yaml.Node) *Plan {
	f := d.mapping(root, "", "apiVersion", "kind", "name", "description", "target", "api", "model",
		"slo", "mix", "seed", "validity", "stages", "waivers")
	d.header(f, "Plan")
	p := &Plan{File: d.file, Validity: DefaultValidity}
	if f.require("name") {
		p.Name = f.name("name")
	}
	p.Description = f.str("description")
	if f.require("target") {
		p.Target = f.str("target")
		if u, err := url.Parse(p.Target); err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "grpc") || u.Host == "" {
			d.errorf(f.line("target"), "target", "%q is not a URL (http://host:port, https://…, grpc://…)", p.Target)
		}
	}
	p.API = f.str("api")
	if f.require("model") {
		p.Model = f.str("model")
	}
	if f.require("slo") {
		p.SLOPath = f.str("slo")
		p.sloLine = f.line("slo").Line
	}
	if f.require("mix") {
		p.MixPath = f.str("mix")
	}
	if f.has("seed") {
		n, _ := f.integer("seed")
		p.Seed = uint64(n)
	}
	if f.has("validity") {
		p.Validity = d.validity(f.vals["validity"])
	}
	items := f.list("stages")
	if f.require("stages") && len(items) == 0 && f.has("stages") {
		d.errorf(f.line("stages"), "stages", "empty: a plan needs at least one stage")
	}
	seen := map[string]int{}
	for i, n := range items {
		s, ok := d.stage(n, index("stages", i))
		if !ok {
			continue
		}
		if first, dup := seen[s.Name]; dup {
			d.errorf(n, index("stages", i)+".name", "%q is already the name of stages[%d]", s.Name, first)
			continue
		}
		seen[s.Name] = i
		p.Stages = append(p.Stages, s)
	}
	p.Waivers = d.waivers(f, "waivers")
	return p
}

func (d *decoder) validity(n *yaml.Node) Validity {
	f := d.mapping(n, "validity", "max_error_rate", "max_dropped", "max_schedule_lag", "max_client_cpu")
	v := DefaultValidity
	for _, b := range []struct {
		key string
		dst *Decimal
	}{{"max_error_rate", &v.MaxErrorRate}, {"max_dropped", &v.MaxDropped}, {"max_client_cpu", &v.MaxClientCPU}} {
		if f.has(b.key) {
			if x, ok := f.decimal(b.key); ok {
				if x.CmpRatio(1, 1) < 0 {
					d.errorf(f.line(b.key), join("validity", b.key), "%s is above 100%%", x)
				}
				*b.dst = x
			}
		}
	}
	if f.has("max_schedule_lag") {
		if x, ok := f.duration("max_schedule_lag"); ok {
			v.MaxScheduleLag = x
		}
	}
	return v
}

func (d *decoder) stage(n *yaml.Node, path string) (Stage, bool) {
	f := d.mapping(n, path, "name", "description", "rate", "concurrency", "duration", "warmup",
		"arrival", "burstiness", "objectives", "manual")
	s := Stage{Line: f.node.Line}
	errs := len(d.errs)
	if f.require("name") {
		s.Name = f.name("name")
	}
	s.Description = f.str("description")
	if f.has("manual") {
		s.Manual = f.boolean("manual")
	}
	if s.Manual {
		for _, k := range []string{"rate", "concurrency", "duration", "warmup", "arrival", "burstiness", "objectives"} {
			if f.has(k) {
				d.errorf(f.line(k), join(path, k), "a manual stage is not run: it takes only name, description and manual")
			}
		}
		return s, len(d.errs) == errs
	}
	switch {
	case f.has("rate") && f.has("concurrency"):
		d.errorf(f.line("concurrency"), join(path, "concurrency"), "give rate (open loop) or concurrency (closed loop), not both")
	case f.has("rate"):
		if r, ok := f.float("rate"); ok {
			if r <= 0 {
				d.errorf(f.line("rate"), join(path, "rate"), "must be > 0 requests per second")
			}
			s.Rate = r
		}
	case f.has("concurrency"):
		if c, ok := f.integer("concurrency"); ok {
			if c < 1 {
				d.errorf(f.line("concurrency"), join(path, "concurrency"), "must be ≥ 1")
			}
			s.Concurrency = c
		}
	default:
		d.errorf(f.node, join(path, "rate"), "required: give rate (requests/s) or concurrency, or manual: true")
	}
	if f.require("duration") {
		if v, ok := f.duration("duration"); ok {
			if v <= 0 {
				d.errorf(f.line("duration"), join(path, "duration"), "must be > 0")
			}
			s.Duration = v
		}
	}
	if f.has("warmup") {
		if v, ok := f.duration("warmup"); ok {
			if s.Duration > 0 && v >= s.Duration {
				d.errorf(f.line("warmup"), join(path, "warmup"), "%s leaves nothing of the %s stage to measure", v, s.Duration)
			}
			s.Warmup = v
		}
	}
	if f.has("arrival") {
		s.Arrival = f.str("arrival")
		switch s.Arrival {
		case ArrivalConstant, ArrivalPoisson, ArrivalGamma:
		default:
			d.errorf(f.line("arrival"), join(path, "arrival"), "%q: want constant, poisson or gamma", s.Arrival)
		}
		if s.Concurrency > 0 {
			d.errorf(f.line("arrival"), join(path, "arrival"), "a closed-loop (concurrency) stage has no arrival process")
		}
	}
	if f.has("burstiness") {
		if b, ok := f.float("burstiness"); ok {
			if b <= 0 {
				d.errorf(f.line("burstiness"), join(path, "burstiness"), "must be > 0 (1 is Poisson, below 1 burstier)")
			}
			s.Burstiness = b
		}
		if s.Arrival != ArrivalGamma {
			d.errorf(f.line("burstiness"), join(path, "burstiness"), "only gamma arrivals take burstiness: add arrival: gamma")
		}
	} else if s.Arrival == ArrivalGamma {
		s.Burstiness = 1
	}
	if f.has("objectives") {
		if n := d.resolve(f.vals["objectives"]); n != nil && n.Kind == yaml.ScalarNode && n.Value == "all" {
			s.Objectives = nil
		} else {
			s.Objectives = append([]string{}, f.names("objectives")...)
			if len(s.Objectives) == 0 {
				d.errorf(f.line("objectives"), join(path, "objectives"), "empty: list objective names, or write all")
			}
		}
	}
	return s, len(d.errs) == errs
}
