package slo

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// decoder walks a yaml.Node tree, collecting errors with their lines.
type decoder struct {
	file   string
	errs   Errors
	budget int // nodes left to visit; aliases could otherwise blow up
}

const (
	maxNodes  = 100000
	maxErrors = 50
)

// parseDocument decodes data into its root mapping node, or records why not.
func (d *decoder) parseDocument(data []byte) *yaml.Node {
	d.budget = maxNodes
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		d.errs = append(d.errs, yamlwalk.SyntaxError(d.file, data, err))
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		d.errs = append(d.errs, yamlwalk.Errorf(d.file, 0, "", "empty document"))
		return nil
	}
	root := d.resolve(doc.Content[0])
	if root == nil || root.Kind != yaml.MappingNode {
		d.errorf(doc.Content[0], "", "the document must be a mapping (key: value lines)")
		return nil
	}
	return root
}

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, yamlwalk.Errorf(d.file, line, field, format, args...))
}

// resolve follows aliases and spends the visit budget.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	d.budget--
	if d.budget < 0 {
		if d.budget == -1 {
			d.errorf(n, "", "document too large or too deeply aliased")
		}
		return nil
	}
	return n
}

// fields is one mapping being read: lookups by key, unknown keys reported.
type fields struct {
	d    *decoder
	path string
	node *yaml.Node
	keys map[string]*yaml.Node // key node
	vals map[string]*yaml.Node // value node
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// mapping reads n as a mapping whose keys must be among known.
func (d *decoder) mapping(n *yaml.Node, path string, known ...string) *fields {
	f := &fields{d: d, path: path, node: n, keys: map[string]*yaml.Node{}, vals: map[string]*yaml.Node{}}
	n = d.resolve(n)
	if n == nil {
		return f
	}
	f.node = n
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping (key: value), got %s", describe(n))
		return f
	}
	ok := map[string]bool{}
	for _, k := range known {
		ok[k] = true
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "keys must be plain words")
			continue
		}
		key := k.Value
		if !ok[key] {
			sorted := append([]string(nil), known...)
			sort.Strings(sorted)
			d.errorf(k, join(path, key), "unknown field (known: %s)", strings.Join(sorted, ", "))
			continue
		}
		if _, dup := f.keys[key]; dup {
			d.errorf(k, join(path, key), "given twice")
			continue
		}
		f.keys[key], f.vals[key] = k, v
	}
	return f
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// has reports whether key was given.
func (f *fields) has(key string) bool { _, ok := f.vals[key]; return ok }

// line is the line of key (or of the mapping when absent).
func (f *fields) line(key string) *yaml.Node {
	if k, ok := f.keys[key]; ok {
		return k
	}
	return f.node
}

// scalar returns the value node of key if it is a scalar.
func (f *fields) scalar(key string) (*yaml.Node, bool) {
	v, ok := f.vals[key]
	if !ok {
		return nil, false
	}
	v = f.d.resolve(v)
	if v == nil {
		return nil, false
	}
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		f.d.errorf(v, join(f.path, key), "want a single value, got %s", describe(v))
		return nil, false
	}
	return v, true
}

func (f *fields) require(key string) bool {
	if f.has(key) {
		return true
	}
	f.d.errorf(f.node, join(f.path, key), "required")
	return false
}

func (f *fields) str(key string) string {
	v, ok := f.scalar(key)
	if !ok {
		return ""
	}
	return v.Value
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// name reads an identifier (objective, stage, class names).
func (f *fields) name(key string) string {
	v, ok := f.scalar(key)
	if !ok {
		return ""
	}
	if !nameRE.MatchString(v.Value) || len(v.Value) > 128 {
		f.d.errorf(v, join(f.path, key), "%q is not a name: use letters, digits and _ . : - (at most 128)", v.Value)
		return ""
	}
	return v.Value
}

func (f *fields) duration(key string) (time.Duration, bool) {
	v, ok := f.scalar(key)
	if !ok {
		return 0, false
	}
	d, err := yamlwalk.ParseDuration(v.Value)
	if err != nil {
		f.d.errorf(v, join(f.path, key), "%v", err)
		return 0, false
	}
	return d, true
}

func (f *fields) decimal(key string) (Decimal, bool) {
	v, ok := f.scalar(key)
	if !ok {
		return Decimal{}, false
	}
	d, err := ParseDecimal(v.Value)
	if err != nil {
		f.d.errorf(v, join(f.path, key), "%q is not a non-negative number or percentage (%v)", v.Value, err)
		return Decimal{}, false
	}
	return d, true
}

func (f *fields) float(key string) (float64, bool) {
	d, ok := f.decimal(key)
	return d.Float(), ok
}

func (f *fields) integer(key string) (int, bool) {
	v, ok := f.scalar(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v.Value)
	if err != nil || n < 0 {
		f.d.errorf(v, join(f.path, key), "%q is not a whole number ≥ 0", v.Value)
		return 0, false
	}
	return n, true
}

func (f *fields) boolean(key string) bool {
	v, ok := f.scalar(key)
	if !ok {
		return false
	}
	switch v.Value {
	case "true", "True", "TRUE", "yes":
		return true
	case "false", "False", "FALSE", "no":
		return false
	}
	f.d.errorf(v, join(f.path, key), "%q is not true or false", v.Value)
	return false
}

// list returns the items of a sequence value.
func (f *fields) list(key string) []*yaml.Node {
	v, ok := f.vals[key]
	if !ok {
		return nil
	}
	v = f.d.resolve(v)
	if v == nil {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		f.d.errorf(v, join(f.path, key), "want a list, got %s", describe(v))
		return nil
	}
	return v.Content
}

// strings reads a list of names, or one name.
func (f *fields) names(key string) []string {
	v, ok := f.vals[key]
	if !ok {
		return nil
	}
	v = f.d.resolve(v)
	if v == nil {
		return nil
	}
	var items []*yaml.Node
	switch v.Kind {
	case yaml.SequenceNode:
		items = v.Content
	case yaml.ScalarNode:
		items = []*yaml.Node{v}
	default:
		f.d.errorf(v, join(f.path, key), "want a list of names, got %s", describe(v))
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		it = f.d.resolve(it)
		if it == nil {
			continue
		}
		p := join(f.path, key)
		if v.Kind == yaml.SequenceNode {
			p = index(p, i)
		}
		if it.Kind != yaml.ScalarNode || !nameRE.MatchString(it.Value) {
			f.d.errorf(it, p, "%s is not a name", describe(it))
			continue
		}
		out = append(out, it.Value)
	}
	return out
}
