package rules

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/slo"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCases are the SLO files whose rules are kept in testdata/ (the
// promtool tests load those files).
var goldenCases = []struct{ spec, name string }{
	{"../../testdata/slo/chat.yaml", "chat"},
	{"../../testdata/slo/chat-28d.yaml", "chat-28d"},
}

func generate(t *testing.T, path string) *Result {
	t.Helper()
	spec, err := slo.LoadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Generate(spec, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./slo/rules -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the generated output (go test ./slo/rules -update rewrites it after review):\n%s", path, firstDiff(string(want), string(got)))
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + fmt.Sprint(i+1) + ":\n  want: " + a + "\n  got:  " + b
		}
	}
	return ""
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			r := generate(t, c.spec)
			p, err := r.Prometheus()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".rules.yaml", p)
			s, err := r.Sloth()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".sloth.yaml", s)
		})
	}
}
