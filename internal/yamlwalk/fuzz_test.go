package yamlwalk

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzWalk: no input panics the walk, and every error names the file and a
// line within it.
func FuzzWalk(f *testing.F) {
	files, _ := filepath.Glob("testdata/syntax/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("a: {b: [1, 2.5, x, 3d]}\nc: yes\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, root := Parse("f.yaml", data)
		var walk func(Node, int)
		walk = func(x Node, depth int) {
			if depth > 20 || !x.Valid() {
				return
			}
			if x.IsScalar() {
				x.Int(-5, 5)
				x.Duration()
				x.Bool()
				return
			}
			if l, ok := x.List(); ok {
				for _, c := range l {
					walk(c, depth+1)
				}
				return
			}
			if m, ok := x.Map(); ok {
				for _, k := range m.Keys() {
					c, _ := m.Get(k)
					walk(c, depth+1)
				}
			}
		}
		walk(root, 0)
		err := d.Err()
		if err == nil {
			return
		}
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Fatalf("%T %v is not Errors", err, err)
		}
		// A node can sit just past the last line break (an empty document).
		lines := len(lineEnds(data))
		for i, e := range es {
			if e.File != "f.yaml" || e.Line < 0 || e.Line > lines+1 || e.Err == nil {
				t.Fatalf("bad error %q (file has %d lines)", e.Error(), lines)
			}
			if i > 0 && e.Line < es[i-1].Line && e.Line != 0 {
				t.Fatalf("not sorted by line: %v", err)
			}
		}
	})
}
