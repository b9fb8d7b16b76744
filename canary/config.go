package canary

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/slo"
)

// Defaults of a canary file's optional fields.
const (
	DefaultListen             = "127.0.0.1:9464"
	DefaultEvaluationInterval = time.Minute
	DefaultTimeout            = 30 * time.Second
	DefaultMaxTokens          = 64
	DefaultPrompt             = "Reply with one short sentence about lighthouses."
	apiVersion                = "tailgate/v1"
)

// Config is a canary file (kind: Canary), its SLO and mix files loaded.
type Config struct {
	// File is the path it was read from; relative paths in it are
	// resolved against its directory.
	File string
	// Listen is the address /metrics, /healthz, /readyz and /status are
	// served on (loopback by default).
	Listen string
	// WebConfig is an exporter-toolkit web configuration file (TLS, basic
	// auth), the format Prometheus itself reads; "" serves plain HTTP.
	WebConfig string
	// EvaluationInterval is how often the rolling windows are judged, the
	// gauges set and one log line written.
	EvaluationInterval time.Duration
	// Histograms is which forms of the latency histograms /metrics
	// serves: classic, native or both (the default).
	Histograms prom.HistogramMode
	Targets    []Target
	// Warnings are things the canary cannot do as asked (objectives left
	// to acceptance) and the SLO files' own warnings.
	Warnings []string
}

// Target is one endpoint probed on a schedule and judged against an SLO.
type Target struct {
	Name, URL, API, Model string
	MaxTokens             int
	Stream                bool
	Headers               []string // "Name: value"
	APIKeyFile            string   // "" = $TAILGATE_API_KEY, else $OPENAI_API_KEY
	Insecure              bool
	CAFile                string
	// Timeout bounds each probe: a target slower than it fails the probe
	// (timeout), which burns error and latency budgets.
	Timeout time.Duration
	// Rate is probes per second at a steady pace, or, when Interval is
	// set, 1/Interval with gaps uniform within ±Jitter.
	Rate             float64
	Interval, Jitter time.Duration
	// Mix (from MixPath) or Prompt is what is sent.
	MixPath string
	Mix     *prompts.Mix
	Prompt  string
	SLOPath string
	SLO     *slo.Spec
	// pos is where each key of the target was read (its own or the
	// defaults'), for errors that name the key: not in the fingerprint,
	// since moving a line changes no probe.
	pos map[string]yamlwalk.Pos
	// path is the target's place in the file ("targets[0]").
	path string
	// fingerprint changes whenever anything that shapes the probes does,
	// the SLO and mix files' contents included: a reload restarts only
	// the targets whose fingerprint changed.
	fingerprint string
}

// Schedule describes the probe schedule: "0.2/s" or "every 30s ± 5s".
func (t *Target) Schedule() string {
	if t.Interval > 0 {
		if t.Jitter > 0 {
			return fmt.Sprintf("every %s ± %s", t.Interval, t.Jitter)
		}
		return "every " + t.Interval.String()
	}
	return fmt.Sprintf("%g/s", t.Rate)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// LoadConfig reads a canary file and every SLO and mix file it names.
// Errors in the canary file are yamlwalk errors, "file:line: field:
// message", all of them at once; errors in a named file carry that file's
// own location.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, data)
}

// ParseConfig parses a canary file's bytes; file names it in errors and
// its directory anchors relative paths.
func ParseConfig(file string, data []byte) (*Config, error) {
	doc, root := yamlwalk.Parse(file, data)
	if doc.Failed() {
		return nil, doc.Err()
	}
	c := &Config{File: file, Listen: DefaultListen, EvaluationInterval: DefaultEvaluationInterval, Histograms: prom.HistogramsBoth}
	dir := filepath.Dir(file)
	resolve := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	m, _ := root.Map("apiVersion", "kind", "listen", "web_config", "evaluation_interval", "histograms", "slo", "defaults", "targets")
	if n, ok := m.Require("kind"); ok {
		if k, ok := n.Str(); ok && k != "Canary" {
			n.Errorf("%q: want Canary", k)
		}
	}
	if n, ok := m.Get("apiVersion"); ok {
		if v, ok := n.Str(); ok && v != apiVersion {
			n.Errorf("%q: want %s", v, apiVersion)
		}
	}
	if n, ok := m.Get("listen"); ok {
		if v, ok := n.Str(); ok {
			if _, _, err := net.SplitHostPort(v); err != nil {
				n.Errorf("%q is not HOST:PORT (e.g. 127.0.0.1:9464, or :9464 for every interface)", v)
			}
			c.Listen = v
		}
	}
	if n, ok := m.Get("web_config"); ok {
		if v, ok := n.Str(); ok {
			c.WebConfig = resolve(v)
			if err := web.Validate(c.WebConfig); err != nil {
				n.Errorf("%s: %v", c.WebConfig, err)
			}
		}
	}
	if n, ok := m.Get("evaluation_interval"); ok {
		if d, ok := n.Duration(); ok {
			if d < 100*time.Millisecond {
				n.Errorf("%s is below 100ms", d)
			}
			c.EvaluationInterval = d
		}
	}
	if n, ok := m.Get("histograms"); ok {
		if v, ok := n.Str(); ok {
			if h, err := prom.ParseHistogramMode(v); err != nil {
				n.Errorf("%q: want classic, native or both", v)
			} else {
				c.Histograms = h
			}
		}
	}
	globalSLO := ""
	if n, ok := m.Get("slo"); ok {
		if v, ok := n.Str(); ok {
			globalSLO = resolve(v)
		}
	}
	var defaults yamlwalk.Map
	hasDefaults := false
	if n, ok := m.Get("defaults"); ok {
		defaults, hasDefaults = n.Map(targetDefaultKeys...)
	}
	var fileErrs []error
	if n, ok := m.Require("targets"); ok {
		items, _ := n.List()
		if len(items) == 0 && n.Valid() {
			n.Errorf("empty: a canary needs at least one target")
		}
		seen := map[string]int{}
		for i, it := range items {
			t, ok := parseTarget(it, defaults, hasDefaults, globalSLO, resolve)
			if !ok {
				continue
			}
			if first, dup := seen[t.Name]; dup {
				it.Errorf("name %q is already the name of targets[%d]", t.Name, first)
				continue
			}
			seen[t.Name] = i
			c.Targets = append(c.Targets, t)
		}
	}
	if doc.Failed() {
		return nil, doc.Err()
	}
	// The files the targets name, each loaded once.
	specs, mixes := map[string]*slo.Spec{}, map[string]*prompts.Mix{}
	hashes := map[string]string{}
	sloNames := map[string]string{} // SLO name → file: the metrics' slo label must be unique
	for i := range c.Targets {
		t := &c.Targets[i]
		if _, ok := specs[t.SLOPath]; !ok {
			s, err := slo.LoadSpec(t.SLOPath)
			if err != nil {
				fileErrs = append(fileErrs, err)
				specs[t.SLOPath] = nil
				continue
			}
			if other, dup := sloNames[s.Name]; dup && other != t.SLOPath {
				fileErrs = append(fileErrs, fmt.Errorf("%s: name %q is also the name of %s: the slo label of the metrics would mix them", t.SLOPath, s.Name, other))
			}
			sloNames[s.Name] = t.SLOPath
			specs[t.SLOPath] = s
			c.Warnings = append(c.Warnings, s.Warnings...)
			raw, _ := os.ReadFile(t.SLOPath)
			hashes[t.SLOPath] = sum(raw)
		}
		t.SLO = specs[t.SLOPath]
		if t.MixPath != "" {
			if _, ok := mixes[t.MixPath]; !ok {
				mx, err := prompts.LoadMix(t.MixPath, prompts.LoadOptions{})
				switch {
				case err != nil:
					fileErrs = append(fileErrs, err)
				case mx.IsTrace():
					fileErrs = append(fileErrs, fmt.Errorf("%s: a trace replays its own timestamps and ends; a canary needs a mix it can draw from forever", t.MixPath))
					mx = nil
				}
				mixes[t.MixPath] = mx
			}
			t.Mix = mixes[t.MixPath]
		}
		if t.SLO == nil || (t.MixPath != "" && t.Mix == nil) {
			continue
		}
		mixHash := ""
		if t.Mix != nil {
			mixHash = t.Mix.Hash()
		}
		t.fingerprint = sum([]byte(fmt.Sprintf("%s|%s|%s|%s|%d|%t|%q|%s|%t|%s|%s|%g|%s|%s|%s|%s|%s",
			t.Name, t.URL, t.API, t.Model, t.MaxTokens, t.Stream, t.Headers, t.APIKeyFile, t.Insecure, t.CAFile,
			t.Timeout, t.Rate, t.Interval, t.Jitter, t.Prompt, mixHash, hashes[t.SLOPath])))
		for _, o := range t.SLO.Objectives {
			if !o.HasRecordEvents() {
				c.Warnings = append(c.Warnings, fmt.Sprintf("target %s: %s/%s (%s) is not judged by the canary: %s",
					t.Name, t.SLO.Name, o.Name, o.Metric, notJudgedReason(o.Metric)))
			}
		}
	}
	if len(fileErrs) > 0 {
		return nil, errors.Join(fileErrs...)
	}
	return c, nil
}

// notJudgedReason says why an objective has no per-record events in a
// canary, and where it is judged instead.
func notJudgedReason(m slo.Metric) string {
	if m.PerSession() {
		return "a session objective judges whole agent sessions and the canary's probes are single requests; " +
			"tailgate validate judges it at acceptance"
	}
	if m == slo.QueueDelay {
		return "queue delay comes from the server's histogram, which a canary's few probes barely move and the " +
			"rest of the traffic dominates; judge it with tailgate validate, or alert on the server's own histogram"
	}
	return "a floor is a rate of work under load, and a canary's probes are deliberately too few to make one; " +
		"tailgate validate judges it at acceptance"
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:8]) }

// targetDefaultKeys are the target fields a top-level defaults mapping
// may set for every target.
var targetDefaultKeys = []string{"api", "model", "max_tokens", "stream", "headers", "api_key_file", "insecure",
	"ca_file", "timeout", "schedule", "mix", "prompt", "slo"}

func parseTarget(x yamlwalk.Node, defaults yamlwalk.Map, hasDefaults bool, globalSLO string, resolve func(string) string) (Target, bool) {
	t := Target{API: "openai-chat", MaxTokens: DefaultMaxTokens, Stream: true, Timeout: DefaultTimeout}
	m, ok := x.Map(append([]string{"name", "url"}, targetDefaultKeys...)...)
	if !ok && !m.Node().Valid() {
		return t, false
	}
	t.path = x.Path()
	// get is the target's own field, else the defaults', noting where it
	// was read.
	get := func(key string) (yamlwalk.Node, bool) {
		n, ok := m.Get(key)
		if !ok && hasDefaults {
			n, ok = defaults.Get(key)
		}
		if ok {
			if t.pos == nil {
				t.pos = map[string]yamlwalk.Pos{}
			}
			t.pos[key] = n.Pos()
		}
		return n, ok
	}
	str := func(key string) (string, bool) {
		if n, ok := get(key); ok {
			return n.Str()
		}
		return "", false
	}
	if n, ok := m.Require("name"); ok {
		if v, ok := n.Str(); ok {
			if !nameRE.MatchString(v) || len(v) > 128 {
				n.Errorf("%q is not a name: use letters, digits and _ . : - (at most 128)", v)
			}
			t.Name = v
		}
	}
	if n, ok := m.Require("url"); ok {
		if v, ok := n.Str(); ok {
			if err := checkURL(v); err != nil {
				n.Errorf("%v", err)
			}
			t.URL = v
		}
	}
	if v, ok := str("api"); ok {
		if !slices.Contains(protocol.Names(), v) {
			n, _ := get("api")
			n.Errorf("%q: want one of %s", v, strings.Join(protocol.Names(), ", "))
		}
		t.API = v
	}
	if v, ok := str("model"); ok {
		t.Model = v
	} else if _, given := get("model"); !given {
		m.Errorf("model", "missing: a canary names its model (discovering it would need the target up at start)")
	}
	if n, ok := get("max_tokens"); ok {
		if v, ok := n.Int(1, 1<<20); ok {
			t.MaxTokens = int(v)
		}
	}
	if n, ok := get("stream"); ok {
		if v, ok := n.Bool(); ok {
			t.Stream = v
		}
	}
	if n, ok := get("insecure"); ok {
		if v, ok := n.Bool(); ok {
			t.Insecure = v
		}
	}
	if v, ok := str("ca_file"); ok {
		t.CAFile = resolve(v)
	}
	if v, ok := str("api_key_file"); ok {
		t.APIKeyFile = resolve(v)
	}
	if n, ok := get("headers"); ok {
		hm, _ := n.Map()
		for _, k := range hm.Keys() {
			v, _ := hm.Get(k)
			if s, ok := v.Text(); ok {
				t.Headers = append(t.Headers, k+": "+s)
			}
		}
	}
	if n, ok := get("timeout"); ok {
		if d, ok := n.Duration(); ok {
			if d <= 0 {
				n.Errorf("must be > 0")
			}
			t.Timeout = d
		}
	}
	if n, ok := get("schedule"); ok {
		parseSchedule(n, &t)
	} else {
		m.Errorf("schedule", "missing: give {rate: 0.2} (probes per second) or {interval: 30s, jitter: 5s}")
	}
	mix, hasMix := str("mix")
	prompt, hasPrompt := str("prompt")
	switch {
	case hasMix && hasPrompt:
		m.Errorf("prompt", "give mix or prompt, not both")
	case hasMix:
		t.MixPath = resolve(mix)
	case hasPrompt:
		t.Prompt = prompt
	default:
		t.Prompt = DefaultPrompt
	}
	if v, ok := str("slo"); ok {
		t.SLOPath = resolve(v)
	} else if globalSLO != "" {
		t.SLOPath = globalSLO
	} else {
		m.Errorf("slo", "missing: name the SLO file (kind: SLO) this target is judged against, here or at the top level")
	}
	return t, true
}

func parseSchedule(n yamlwalk.Node, t *Target) {
	m, ok := n.Map("rate", "interval", "jitter")
	if !ok {
		return
	}
	rate, hasRate := m.Get("rate")
	iv, hasInterval := m.Get("interval")
	switch {
	case hasRate && hasInterval:
		m.Errorf("interval", "give rate or interval, not both")
	case hasRate:
		if v, ok := rate.Float(); ok {
			if v <= 0 || v > 100 {
				rate.Errorf("%v: want probes per second in (0, 100]", v)
			}
			t.Rate = v
		}
		if m.Has("jitter") {
			m.Errorf("jitter", "only an interval takes a jitter (a rate is a steady pace)")
		}
	case hasInterval:
		if d, ok := iv.Duration(); ok {
			if d < 10*time.Millisecond {
				iv.Errorf("%s is below 10ms", d)
			} else {
				t.Interval = d
				t.Rate = 1 / d.Seconds()
			}
		}
		if j, ok := m.Get("jitter"); ok {
			if d, ok := j.Duration(); ok {
				if t.Interval > 0 && d > t.Interval {
					j.Errorf("%s is more than the interval %s", d, t.Interval)
				}
				t.Jitter = d
			}
		}
	default:
		m.Node().Errorf("want rate (probes per second) or interval (with an optional jitter)")
	}
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || !strings.Contains(s, "://") {
		return fmt.Errorf("%q is not a URL (want http://host:port)", redact.URL(s))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s: scheme %q: want http or https", redact.URL(s), u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%s: no host", redact.URL(s))
	}
	return nil
}

// yamlKeys are the keys of a canary target that set the fields library
// errors name (*field.Error), which say "model", never a flag.
var yamlKeys = map[string]string{
	"API":        "api",
	"APIKeyFile": "api_key_file",
	"CAFile":     "ca_file",
	"Headers":    "headers",
	"Insecure":   "insecure",
	"MaxTokens":  "max_tokens",
	"Model":      "model",
	"SLO":        "slo",
	"Stream":     "stream",
	"Timeout":    "timeout",
}

// settingName names field f as t's canary file does: the key's path and
// where it was read ("targets[0].headers at canary.yaml:9"), or where
// the key would go when the file does not set it ("targets[0].headers");
// "" for a field no key sets.
func (t *Target) settingName(f string) string {
	key, ok := yamlKeys[f]
	if !ok {
		return ""
	}
	if p, ok := t.pos[key]; ok && p.Line > 0 {
		return fmt.Sprintf("%s at %s:%d", p.Field, p.File, p.Line)
	}
	return yamlwalk.Join(t.path, key)
}

// errText is err with every setting it names worded as t's YAML key.
func (t *Target) errText(err error) string { return field.Reword(err, t.settingName) }
