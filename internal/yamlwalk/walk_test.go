package yamlwalk

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// One walk over a file with several problems reports them all, sorted by
// line, each as file:line: path: message and each matchable with errors.As.
func TestWalkCollectsEveryErrorByLine(t *testing.T) {
	t.Parallel()
	data := "name: x\nsize: lots\nitems:\n  - {n: 1, wait: 5O0ms}\n  - {n: 2.5, wait: 30d}\nflag: maybe\nsize2: 3\n"
	d, root := Parse("f.yaml", []byte(data))
	m, _ := root.Map("name", "size", "items", "flag", "owner")
	// Read out of file order: the report is still by line.
	if n, ok := m.Get("flag"); ok {
		n.Bool()
	}
	m.Require("owner")
	n, _ := m.Get("size")
	n.Int(0, 10)
	items, _ := m.Require("items")
	list, _ := items.List()
	var waits []time.Duration
	for _, it := range list {
		im, _ := it.Map("n", "wait")
		if v, ok := im.Get("n"); ok {
			v.Int(0, 9)
		}
		if v, ok := im.Get("wait"); ok {
			if w, ok := v.Duration(); ok {
				waits = append(waits, w)
			}
		}
	}
	want := strings.Join([]string{
		"f.yaml:1: owner missing",
		`f.yaml:2: size: "lots" is not a number`,
		`f.yaml:4: items[0].wait: "5O0ms" is not a duration (want e.g. 150ms, 2s, 5m, 30d)`,
		"f.yaml:5: items[1].n: 2.5 is not a whole number",
		`f.yaml:6: flag: "maybe" is not true or false`,
		"f.yaml:7: size2: unknown field (want one of name, size, items, flag, owner)",
	}, "\n")
	err := d.Err()
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	var es Errors
	var e *Error
	if !errors.As(err, &es) || len(es) != 6 || !errors.As(err, &e) || e.Line != 1 || !errors.Is(err, ErrMissing) {
		t.Fatalf("errors.As/Is: %#v", err)
	}
	if len(waits) != 1 || waits[0] != 30*24*time.Hour {
		t.Fatalf("waits %v", waits)
	}
}

func TestWalkShapes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"- a\n", "f.yaml:1: want a mapping (key: value), got a list"},
		{"a: 1\na: 2\n", "f.yaml:2: a: duplicate key (first on line 1)"},
		{"? [x]\n: 1\n", "f.yaml:1: keys must be plain names"},
		{"b: &b {x: 1}\n<<: *b\n", "f.yaml:2: merge keys (<<) are not supported"},
		{"a: [1]\n", "f.yaml:1: a: want a single value, got a list"},
		{"a: 5\n", `f.yaml:1: a: want text, got "5"`},
		{"a: .inf\n", `f.yaml:1: a: ".inf" is not a finite number`},
		{"a: 1e3\n", "f.yaml:1: a: 1e3 is out of range [0, 10]"},
		{"a: -2s\n", `f.yaml:1: a: "-2s" is negative`},
		{"", "f.yaml: empty file"},
	} {
		d, root := Parse("f.yaml", []byte(c.yaml))
		if root.Valid() {
			if m, ok := root.Map(); ok {
				if n, ok := m.Get("a"); ok {
					switch {
					case strings.Contains(c.yaml, "s\n"):
						n.Duration()
					case strings.Contains(c.yaml, "e3"):
						n.Int(0, 10)
					case strings.Contains(c.yaml, "inf"):
						n.Float()
					default:
						n.Str()
					}
				}
			}
		}
		if err := d.Err(); err == nil || err.Error() != c.want {
			t.Errorf("%q: got %v, want %s", c.yaml, err, c.want)
		}
	}
}

// Aliases are followed, but a file cannot make the walk visit more than
// maxNodes nodes.
func TestWalkAliasBudget(t *testing.T) {
	t.Parallel()
	y := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g"} {
		y += n + ": &" + n + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = n
	}
	d, root := Parse("f.yaml", []byte(y))
	var walk func(Node)
	walk = func(x Node) {
		if x.IsScalar() {
			return
		}
		if l, ok := x.List(); ok {
			for _, c := range l {
				walk(c)
			}
		}
	}
	m, _ := root.Map()
	g, _ := m.Get("g")
	walk(g)
	err := d.Err()
	if err == nil || !strings.Contains(err.Error(), "too deeply aliased") {
		t.Fatalf("got %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"500ms": 500 * time.Millisecond, "30d": 30 * 24 * time.Hour,
		"4w": 28 * 24 * time.Hour, "1h30m": 90 * time.Minute, "250us": 250 * time.Microsecond, "0": 0} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("%s = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"5O0ms", "d", "1.5d", "-3d", "", "-1s", "99999999w", "2"} {
		if d, err := ParseDuration(bad); err == nil {
			t.Errorf("%q parsed as %v", bad, d)
		}
	}
}

// Only checks a mapping's keys after one of its values said which are
// allowed; Pos locates a value for an error found after the walk.
func TestWalkOnlyAndPos(t *testing.T) {
	t.Parallel()
	d, root := Parse("f.yaml", []byte("src:\n  type: a\n  path: x\n  size: 3\n"))
	m, _ := root.Map("src")
	src, _ := m.Get("src")
	sm, _ := src.Map()
	before := d.Count()
	if !src.IsMap() || src.IsList() || !sm.Only("type", "path", "size") || d.Count() != before {
		t.Fatal("Only with every key known recorded an error")
	}
	if sm.Only("type", "path") {
		t.Fatal("Only missed size")
	}
	p, _ := sm.Get("path")
	if e := p.Pos().Errorf("open %s: gone", "x"); e.Error() != "f.yaml:3: src.path: open x: gone" {
		t.Fatalf("Pos: %v", e)
	}
	if err := d.Err(); err == nil || err.Error() != "f.yaml:4: src.size: unknown field (want one of type, path)" || d.Count() != 1 {
		t.Fatalf("got %v (count %d)", err, d.Count())
	}
}
