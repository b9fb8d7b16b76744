package slo

import (
	"net/url"
	"regexp"
	"strconv"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// reader reads one SLO or plan file through yamlwalk, recording every
// problem in doc. Its methods return what they read and, where a caller
// needs it, whether that part was read without error.
type reader struct {
	doc *yamlwalk.Doc
	// tables are the metric tables objectives are read by (nil: the
	// built-in ones).
	tables *Tables
}

// clean reports whether no error was recorded since count start.
func (r reader) clean(start int) bool { return r.doc.Count() == start }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// name reads an identifier (objective, stage, class names).
func name(x yamlwalk.Node) string {
	v, ok := x.Text()
	if !ok {
		return ""
	}
	if !nameRE.MatchString(v) || len(v) > 128 {
		x.Errorf("%q is not a name: use letters, digits and _ . : - (at most 128)", v)
		return ""
	}
	return v
}

// names reads a list of names, or one name, and returns the nodes that
// are names.
func names(x yamlwalk.Node) []yamlwalk.Node {
	var items []yamlwalk.Node
	switch {
	case x.IsList():
		items, _ = x.List()
	case x.IsScalar():
		items = []yamlwalk.Node{x}
	default:
		x.Errorf("want a list of names, got %s", x.Describe())
		return nil
	}
	var out []yamlwalk.Node
	for _, it := range items {
		if !it.Valid() {
			continue
		}
		if !it.IsScalar() || !nameRE.MatchString(it.Yaml().Value) {
			it.Errorf("%s is not a name", it.Describe())
			continue
		}
		out = append(out, it)
	}
	return out
}

// decimal reads a non-negative number or percentage ("0.99", "99%").
func decimal(x yamlwalk.Node) (Decimal, bool) {
	v, ok := x.Text()
	if !ok {
		return Decimal{}, false
	}
	d, err := ParseDecimal(v)
	if err != nil {
		x.Errorf("%q is not a non-negative number or percentage (%v)", v, err)
		return Decimal{}, false
	}
	return d, true
}

// whole reads a whole number ≥ 0.
func whole(x yamlwalk.Node) (int, bool) {
	v, ok := x.Text()
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		x.Errorf("%q is not a whole number ≥ 0", v)
		return 0, false
	}
	return n, true
}

// optional reads key's value with read when key is given ("" when not).
func optional(f yamlwalk.Map, key string, read func(yamlwalk.Node) string) string {
	if n, ok := f.Get(key); ok {
		return read(n)
	}
	return ""
}

// required reads key's value with read, or records that key is missing.
func required(f yamlwalk.Map, key string, read func(yamlwalk.Node) string) string {
	if n, ok := f.Require(key); ok {
		return read(n)
	}
	return ""
}

// text reads any single value as text ("" after an error).
func text(x yamlwalk.Node) string {
	v, _ := x.Text()
	return v
}

// runbook reads a runbook URL: absolute http or https, because an alert's
// link must open from a pager, not resolve against anything ("" after an
// error).
func runbook(x yamlwalk.Node) string {
	v, ok := x.Text()
	if !ok {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		x.Errorf("%q is not an absolute http(s) URL", v)
		return ""
	}
	return v
}
