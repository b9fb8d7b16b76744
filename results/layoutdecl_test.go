package results

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every file or directory name layout.go declares (a constant named
// …File or …Dir) is one --force removes: a results file added without a
// place in layoutNames would be left behind by --force and read by the
// next run as its own.
func TestLayoutDeclaresEveryFile(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "layout.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !strings.HasSuffix(id.Name, "File") && !strings.HasSuffix(id.Name, "Dir") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				name, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				n++
				// The mix's canonical copy lives under InputsDir, which is
				// removed whole.
				if id.Name == "CanonicalMixFile" {
					continue
				}
				if !slices.Contains(layoutNames, name) {
					t.Errorf("%s (%q) is declared in layout.go but not in layoutNames: --force would leave it", id.Name, name)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d file names in layout.go: the test no longer reads the declarations", n)
	}
}
