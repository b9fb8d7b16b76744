package prompts

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// ynode is a YAML node with the file it came from and its field path
// ("classes[2].weight"), so every error names file, line and field.
type ynode struct {
	file string
	path string
	n    *yaml.Node
}

func (x ynode) line() int {
	if x.n == nil {
		return 0
	}
	return x.n.Line
}

func (x ynode) errf(format string, args ...any) *Error {
	return errAt(x.file, x.line(), x.path, format, args...)
}

func (x ynode) child(key string, n *yaml.Node) ynode {
	p := key
	if x.path != "" {
		p = x.path + "." + key
	}
	return ynode{file: x.file, path: p, n: resolve(n)}
}

// resolve follows aliases (bounded, against alias cycles).
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// parseYAML reads one YAML document into a node; a syntax error is an
// *Error at the line at fault.
func parseYAML(file string, data []byte) (ynode, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return ynode{}, yamlwalk.SyntaxError(file, data, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return ynode{}, errAt(file, 0, "", "empty file")
	}
	return ynode{file: file, n: resolve(doc.Content[0])}, nil
}

// ymap is a mapping node's fields, in file order.
type ymap struct {
	node ynode
	keys []string
	vals map[string]ynode
	kpos map[string]int // key line
}

func (x ynode) mapping() (*ymap, error) {
	if x.n == nil || x.n.Kind != yaml.MappingNode {
		return nil, x.errf("want a mapping (key: value), got %s", kindName(x.n))
	}
	m := &ymap{node: x, vals: map[string]ynode{}, kpos: map[string]int{}}
	for i := 0; i+1 < len(x.n.Content); i += 2 {
		k := resolve(x.n.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode {
			return nil, errAt(x.file, x.n.Content[i].Line, x.path, "keys must be plain names")
		}
		if k.Value == "<<" {
			return nil, errAt(x.file, k.Line, x.path, "merge keys (<<) are not supported")
		}
		if _, dup := m.vals[k.Value]; dup {
			return nil, errAt(x.file, k.Line, x.child(k.Value, nil).path, "duplicate key")
		}
		m.keys = append(m.keys, k.Value)
		m.vals[k.Value] = x.child(k.Value, x.n.Content[i+1])
		m.kpos[k.Value] = k.Line
	}
	return m, nil
}

func (m *ymap) get(key string) (ynode, bool) {
	v, ok := m.vals[key]
	if ok && v.n != nil && v.n.Kind == yaml.ScalarNode && v.n.Tag == "!!null" {
		return v, false // "key:" with no value reads as absent
	}
	return v, ok
}

// require returns the field or a "field missing" error at the mapping.
func (m *ymap) require(key string) (ynode, error) {
	v, ok := m.get(key)
	if !ok {
		return v, missingAt(m.node.file, m.node.line(), m.node.child(key, nil).path)
	}
	return v, nil
}

// only fails on the first key not in allowed (typos like "wieght").
func (m *ymap) only(allowed ...string) error {
	for _, k := range m.keys {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			return errAt(m.node.file, m.kpos[k], m.node.child(k, nil).path,
				"unknown field (want one of %s)", strings.Join(allowed, ", "))
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported node"
}

func (x ynode) scalar() (string, error) {
	if x.n == nil || x.n.Kind != yaml.ScalarNode {
		return "", x.errf("want a single value, got %s", kindName(x.n))
	}
	return x.n.Value, nil
}

func (x ynode) str() (string, error) {
	s, err := x.scalar()
	if err != nil {
		return "", err
	}
	if x.n.Tag != "!!str" {
		return "", x.errf("want text, got %s", kindName(x.n))
	}
	return s, nil
}

func (x ynode) float() (float64, error) {
	s, err := x.scalar()
	if err != nil {
		return 0, err
	}
	if x.n.Tag != "!!int" && x.n.Tag != "!!float" {
		return 0, x.errf("%q is not a number", s)
	}
	var f float64
	if err := x.n.Decode(&f); err != nil {
		return 0, x.errf("%q is not a number", s)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, x.errf("%q is not a finite number", s)
	}
	return f, nil
}

// int reads a whole number in [lo, hi].
func (x ynode) int(lo, hi int64) (int64, error) {
	f, err := x.float()
	if err != nil {
		return 0, err
	}
	var v int64
	switch {
	case x.n.Tag == "!!int":
		// Decoded as an integer: exact for large seeds, which a float rounds.
		if err := x.n.Decode(&v); err != nil {
			return 0, x.errf("%v is out of range [%d, %d]", x.n.Value, lo, hi)
		}
	case f != math.Trunc(f):
		return 0, x.errf("%v is not a whole number", x.n.Value)
	case f < -0x1p63 || f >= 0x1p63:
		return 0, x.errf("%v is out of range [%d, %d]", x.n.Value, lo, hi)
	default:
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, x.errf("%v is out of range [%d, %d]", x.n.Value, lo, hi)
	}
	return v, nil
}

func (x ynode) bool() (bool, error) {
	s, err := x.scalar()
	if err != nil {
		return false, err
	}
	if x.n.Tag != "!!bool" {
		return false, x.errf("%q is not true or false", s)
	}
	return s == "true" || s == "True" || s == "TRUE", nil
}

// duration reads a duration in the one dialect of yamlwalk.ParseDuration.
func (x ynode) duration() (time.Duration, error) {
	s, err := x.scalar()
	if err != nil {
		return 0, err
	}
	d, perr := yamlwalk.ParseDuration(s)
	if perr != nil {
		return 0, x.errf("%v", perr)
	}
	return d, nil
}

func (x ynode) seq() ([]ynode, error) {
	if x.n == nil || x.n.Kind != yaml.SequenceNode {
		return nil, x.errf("want a list, got %s", kindName(x.n))
	}
	out := make([]ynode, len(x.n.Content))
	for i, c := range x.n.Content {
		out[i] = ynode{file: x.file, path: fmt.Sprintf("%s[%d]", x.path, i), n: resolve(c)}
	}
	return out, nil
}

// anyMap decodes a mapping of request parameters.
func (x ynode) anyMap() (map[string]any, error) {
	if _, err := x.mapping(); err != nil {
		return nil, err
	}
	var m map[string]any
	if err := x.n.Decode(&m); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			return nil, x.errf("%s", te.Errors[0])
		}
		return nil, x.errf("%v", err)
	}
	if err := checkJSONable(m); err != nil {
		return nil, x.errf("%v", err)
	}
	return m, nil
}

// checkJSONable rejects values encoding/json cannot write (YAML allows
// non-string keys and timestamps).
func checkJSONable(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if err := checkJSONable(e); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	case []any:
		for _, e := range t {
			if err := checkJSONable(e); err != nil {
				return err
			}
		}
	case nil, string, bool, int, int64, uint64, float64:
	case float32:
	default:
		return fmt.Errorf("unsupported value %v (%T)", v, v)
	}
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return fmt.Errorf("not a finite number")
	}
	return nil
}
