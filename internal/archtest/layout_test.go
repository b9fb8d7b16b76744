package archtest

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// layoutRows reads the package table of README.md's Layout section:
// package → its imports column, each a package path relative to the module.
func layoutRows(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	inLayout := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inLayout = line == "## Layout"
		}
		if !inLayout || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("README.md: a row of %d cells, want 3: %s", len(cells), line)
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		var imps []string
		if c := strings.TrimSpace(cells[2]); c != "—" {
			for _, s := range strings.Split(c, ",") {
				imps = append(imps, strings.TrimSpace(s))
			}
		}
		rows[name] = imps
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// README.md's layout table is the module's import graph: every
// package outside internal/ has a row, and its imports column is exactly
// the module's packages it imports (internal/ left out). cmd/tailgate,
// which imports nearly everything, is only required to have its row.
func TestArchitectureTableMatchesImports(t *testing.T) {
	t.Parallel()
	rows := layoutRows(t)
	if len(rows) < 20 {
		t.Fatalf("README.md: %d package rows: the table was not found", len(rows))
	}
	pkgs := packages(t)
	for path, p := range pkgs {
		if within(path, "internal") {
			continue
		}
		doc, ok := rows[path]
		if !ok {
			t.Errorf("README.md: no row for package %s", path)
			continue
		}
		if path == "cmd/tailgate" {
			continue
		}
		var want []string
		for _, imp := range imports(p) {
			if !within(imp, "internal") {
				want = append(want, imp)
			}
		}
		slices.Sort(want)
		got := slices.Clone(doc)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("README.md: %s imports %s, the table says %s",
				path, listOrNone(want), listOrNone(doc))
		}
	}
	for name := range rows {
		if name == "internal/…" {
			continue
		}
		if _, ok := pkgs[name]; !ok {
			t.Errorf("README.md: a row for %s, which is no package of the module", name)
		}
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
