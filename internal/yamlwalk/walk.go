package yamlwalk

import (
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	maxNodes  = 100000 // node visits per file: aliases could otherwise blow up
	maxErrors = 50
)

// Doc is one file being read: it collects every error found in it.
type Doc struct {
	file   string
	errs   Errors
	extra  int // errors past maxErrors
	budget int
}

// Parse reads data as one YAML document. The root is invalid (Valid false)
// when the file is not YAML or is empty; Err then says why.
func Parse(file string, data []byte) (*Doc, Node) {
	d := &Doc{file: file, budget: maxNodes}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		d.add(SyntaxError(file, data, err))
		return d, Node{d: d}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		d.add(Errorf(file, 0, "", "empty file"))
		return d, Node{d: d}
	}
	return d, Node{d: d, n: d.resolve(doc.Content[0])}
}

// File is the file name errors carry.
func (d *Doc) File() string { return d.file }

// Failed reports whether any error was recorded.
func (d *Doc) Failed() bool { return len(d.errs) > 0 }

// Count is the number of errors recorded so far, those past the shown
// limit included: a reader compares counts to tell whether one part of the
// file (an item of a list) was read without error.
func (d *Doc) Count() int { return len(d.errs) + d.extra }

// Add records e.
func (d *Doc) Add(e *Error) { d.add(e) }

func (d *Doc) add(e *Error) {
	if len(d.errs) >= maxErrors {
		d.extra++
		return
	}
	d.errs = append(d.errs, e)
}

// Err is every error recorded, sorted by line, or nil.
func (d *Doc) Err() error {
	if len(d.errs) == 0 {
		return nil
	}
	es := append(Errors(nil), d.errs...)
	es.sortByLine()
	if d.extra > 0 {
		es = append(es, Errorf(d.file, 0, "", "%d more problems not shown", d.extra))
	}
	return es
}

// resolve follows aliases and spends the visit budget.
func (d *Doc) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	d.budget--
	if d.budget < 0 {
		if d.budget == -1 {
			d.add(Errorf(d.file, 0, "", "document too large or too deeply aliased"))
		}
		return nil
	}
	return n
}

// Node is a value in the file with its field path ("classes[2].weight").
// A Node for an absent field is not Valid but still carries the path and
// the line of the mapping it was looked up in, for errors about it.
type Node struct {
	d    *Doc
	path string
	n    *yaml.Node
	line int // used when n is nil
}

// Valid reports whether the node exists.
func (x Node) Valid() bool { return x.n != nil }

// Path is the field path; "" for the document.
func (x Node) Path() string { return x.path }

// Line is the node's 1-based line.
func (x Node) Line() int {
	if x.n != nil {
		return x.n.Line
	}
	return x.line
}

// Yaml is the underlying node (nil when absent), for decoding into Go values.
func (x Node) Yaml() *yaml.Node { return x.n }

// Errorf records an error at the node; none once the visit budget is spent
// and the node is absent (cut off by the budget, or a field of a mapping
// read only in part).
func (x Node) Errorf(format string, args ...any) {
	if x.exhausted() {
		return
	}
	x.d.add(Errorf(x.d.file, x.Line(), x.path, format, args...))
}

// Pos is where the node is, for errors found after the walk (a file the
// node names cannot be opened).
func (x Node) Pos() Pos { return Pos{File: x.d.file, Line: x.Line(), Field: x.path} }

// Missing records "path missing" at the node's line.
func (x Node) Missing() {
	if x.exhausted() {
		return
	}
	x.d.add(&Error{File: x.d.file, Line: x.Line(), Field: x.path, Err: ErrMissing})
}

// Child is the node of field key under x, at x's line when n is nil.
func (x Node) child(path string, n *yaml.Node) Node {
	c := Node{d: x.d, path: path, line: x.Line()}
	if n != nil {
		c.n = x.d.resolve(n)
	}
	return c
}

// Join is path.key, or key at the top.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index is path[i].
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Describe names what the node is, for messages: "a mapping", "a list",
// "nothing", or the quoted scalar.
func (x Node) Describe() string {
	n := x.n
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return "nothing"
	case n.Kind == yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// IsMap reports whether the node is a mapping.
func (x Node) IsMap() bool { return x.n != nil && x.n.Kind == yaml.MappingNode }

// IsList reports whether the node is a sequence.
func (x Node) IsList() bool { return x.n != nil && x.n.Kind == yaml.SequenceNode }

// IsScalar reports whether the node is a non-null scalar.
func (x Node) IsScalar() bool {
	return x.n != nil && x.n.Kind == yaml.ScalarNode && x.n.Tag != "!!null"
}

// exhausted: after the visit budget is spent, absent nodes are not
// reported one by one.
func (x Node) exhausted() bool { return x.n == nil && x.d.budget < 0 }

// List reads a sequence.
func (x Node) List() ([]Node, bool) {
	if x.n == nil || x.n.Kind != yaml.SequenceNode {
		x.Errorf("want a list, got %s", x.Describe())
		return nil, false
	}
	out := make([]Node, len(x.n.Content))
	for i, c := range x.n.Content {
		out[i] = x.child(Index(x.path, i), c)
		out[i].line = c.Line
	}
	return out, true
}

// Text reads any non-null scalar as text (5 reads "5").
func (x Node) Text() (string, bool) {
	if !x.IsScalar() {
		x.Errorf("want a single value, got %s", x.Describe())
		return "", false
	}
	return x.n.Value, true
}

// Str reads a scalar that YAML types as a string (5 and true are not).
func (x Node) Str() (string, bool) {
	s, ok := x.Text()
	if ok && x.n.Tag != "!!str" {
		x.Errorf("want text, got %s", x.Describe())
		return "", false
	}
	return s, ok
}

// Float reads a finite number.
func (x Node) Float() (float64, bool) {
	s, ok := x.Text()
	if !ok {
		return 0, false
	}
	var f float64
	if (x.n.Tag != "!!int" && x.n.Tag != "!!float") || x.n.Decode(&f) != nil {
		x.Errorf("%q is not a number", s)
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		x.Errorf("%q is not a finite number", s)
		return 0, false
	}
	return f, true
}

// Int reads a whole number in [lo, hi].
func (x Node) Int(lo, hi int64) (int64, bool) {
	f, ok := x.Float()
	if !ok {
		return 0, false
	}
	var v int64
	switch {
	case x.n.Tag == "!!int":
		// Decoded as an integer: exact for large seeds, which a float rounds.
		if x.n.Decode(&v) != nil {
			x.Errorf("%v is out of range [%d, %d]", x.n.Value, lo, hi)
			return 0, false
		}
	case f != math.Trunc(f):
		x.Errorf("%v is not a whole number", x.n.Value)
		return 0, false
	case f < -0x1p63 || f >= 0x1p63:
		x.Errorf("%v is out of range [%d, %d]", x.n.Value, lo, hi)
		return 0, false
	default:
		v = int64(f)
	}
	if v < lo || v > hi {
		x.Errorf("%v is out of range [%d, %d]", x.n.Value, lo, hi)
		return 0, false
	}
	return v, true
}

// Bool reads true or false (and YAML 1.1's yes and no).
func (x Node) Bool() (bool, bool) {
	s, ok := x.Text()
	if !ok {
		return false, false
	}
	switch s {
	case "true", "True", "TRUE", "yes":
		return true, true
	case "false", "False", "FALSE", "no":
		return false, true
	}
	x.Errorf("%q is not true or false", s)
	return false, false
}

// Duration reads a duration in the one dialect of ParseDuration.
func (x Node) Duration() (time.Duration, bool) {
	s, ok := x.Text()
	if !ok {
		return 0, false
	}
	d, err := ParseDuration(s)
	if err != nil {
		x.Errorf("%v", err)
		return 0, false
	}
	return d, true
}

// Map is a mapping's fields, in file order.
type Map struct {
	x    Node
	keys []string
	key  map[string]*yaml.Node
	val  map[string]*yaml.Node
}

// Map reads a mapping whose keys must be among known (none given: any key);
// an unknown key is an error naming the known ones.
func (x Node) Map(known ...string) (Map, bool) {
	m := Map{x: x, key: map[string]*yaml.Node{}, val: map[string]*yaml.Node{}}
	if x.n == nil || x.n.Kind != yaml.MappingNode {
		x.Errorf("want a mapping (key: value), got %s", x.Describe())
		return m, false
	}
	ok := true
	for i := 0; i+1 < len(x.n.Content); i += 2 {
		kn := x.d.resolve(x.n.Content[i])
		if kn == nil || kn.Kind != yaml.ScalarNode {
			x.d.add(Errorf(x.d.file, x.n.Content[i].Line, x.path, "keys must be plain names"))
			ok = false
			continue
		}
		k, p := kn.Value, Join(x.path, kn.Value)
		switch {
		case k == "<<":
			x.d.add(Errorf(x.d.file, kn.Line, x.path, "merge keys (<<) are not supported"))
		case len(known) > 0 && !contains(known, k):
			x.d.add(Errorf(x.d.file, kn.Line, p, "unknown field (want one of %s)", strings.Join(known, ", ")))
		case m.key[k] != nil:
			x.d.add(Errorf(x.d.file, kn.Line, p, "duplicate key (first on line %d)", m.key[k].Line))
		default:
			m.keys = append(m.keys, k)
			m.key[k], m.val[k] = kn, x.n.Content[i+1]
			continue
		}
		ok = false
	}
	return m, ok
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// Only records an unknown field for each key not among known, for a
// mapping whose fields depend on one of its values (a source's type); it
// reports whether every key is known.
func (m Map) Only(known ...string) bool {
	ok := true
	for _, k := range m.keys {
		if !contains(known, k) {
			m.x.d.add(Errorf(m.x.d.file, m.key[k].Line, Join(m.x.path, k), "unknown field (want one of %s)", strings.Join(known, ", ")))
			ok = false
		}
	}
	return ok
}

// Node is the mapping itself.
func (m Map) Node() Node { return m.x }

// Keys are the keys given, in file order.
func (m Map) Keys() []string { return m.keys }

// Get returns the value of key. A key given no value ("key:") reads as
// absent; an absent key's Node carries its path and the mapping's line.
func (m Map) Get(key string) (Node, bool) {
	v, ok := m.val[key]
	if ok {
		if r := m.x.d.resolve(v); r != nil && r.Kind == yaml.ScalarNode && r.Tag == "!!null" {
			ok = false
		}
	}
	if !ok {
		return Node{d: m.x.d, path: Join(m.x.path, key), line: m.KeyLine(key)}, false
	}
	return m.x.child(Join(m.x.path, key), v), true
}

// Has reports whether key was given a value.
func (m Map) Has(key string) bool { _, ok := m.Get(key); return ok }

// Require returns the value of key, or records "key missing".
func (m Map) Require(key string) (Node, bool) {
	n, ok := m.Get(key)
	if !ok {
		n.Missing()
	}
	return n, ok
}

// KeyLine is the line of key, or of the mapping when key is absent.
func (m Map) KeyLine(key string) int {
	if k, ok := m.key[key]; ok {
		return k.Line
	}
	return m.x.Line()
}

// Errorf records an error about key at the key's line.
func (m Map) Errorf(key, format string, args ...any) {
	m.x.d.add(Errorf(m.x.d.file, m.KeyLine(key), Join(m.x.path, key), format, args...))
}
