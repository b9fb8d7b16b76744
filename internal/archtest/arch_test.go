// Package archtest holds the tree's layering rules as tests, read from
// `go list` and the parsed source, so a change that breaks one fails CI
// instead of waiting for the next review.
package archtest

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/tailgate-llm/tailgate/"

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

// goList runs `go list` once for the package's parallel tests: each run
// walks the whole module, and the answer cannot change during the tests.
var goList = sync.OnceValues(func() ([]byte, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	return cmd.Output()
})

// packages lists every package of the module (non-test files), a fresh
// map for each caller.
func packages(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := goList()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: run from the module", len(pkgs))
	}
	return pkgs
}

func within(path, root string) bool { return path == root || strings.HasPrefix(path, root+"/") }

func imports(p pkg) []string {
	var own []string
	for _, imp := range p.Imports {
		if strings.HasPrefix(imp, module) {
			own = append(own, strings.TrimPrefix(imp, module))
		}
	}
	return own
}

// A protocol client imports no other protocol's package: what two share
// (transport, SSE) lives beside them; loadgen/protocol is the one seam
// that knows them all. The protocols are what that table imports, so a
// new one is under the rule the moment it is registered.
func TestNoProtocolImportsAnother(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	shared := []string{"loadgen", "loadgen/transport", "loadgen/sse"}
	var protocols []string
	for _, imp := range imports(pkgs["loadgen/protocol"]) {
		if within(imp, "loadgen") && !slices.Contains(shared, imp) {
			protocols = append(protocols, imp)
		}
	}
	if len(protocols) < 4 {
		t.Fatalf("loadgen/protocol imports the protocols %v: the table should hold every client", protocols)
	}
	for path, p := range pkgs {
		for _, proto := range protocols {
			if !within(path, proto) {
				continue
			}
			for _, imp := range imports(p) {
				for _, other := range protocols {
					if other != proto && within(imp, other) {
						t.Errorf("%s imports %s: protocols share code through loadgen/transport or loadgen/sse", path, imp)
					}
				}
			}
		}
	}
}

// The aggregation (loadgen/measure) reads the runner's records; the
// runner's side of loadgen (the runner, the protocols, transport, SSE)
// reads nothing of it, so sending and timing a request never waits on
// what is made of the record.
func TestRunnerImportsNoAggregation(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	m, ok := pkgs["loadgen/measure"]
	if !ok {
		t.Fatal("package loadgen/measure not found: update this rule")
	}
	if !slices.Contains(imports(m), "loadgen") {
		t.Errorf("loadgen/measure imports %v, not loadgen: the rule would check nothing", imports(m))
	}
	for path, p := range pkgs {
		if !within(path, "loadgen") || within(path, "loadgen/measure") {
			continue
		}
		for _, imp := range imports(p) {
			if within(imp, "loadgen/measure") {
				t.Errorf("%s imports %s: the runner's side reads nothing of the aggregation", path, imp)
			}
		}
	}
}

// Use cases (the commands' libraries) meet only through results; the
// output packages (report, evidence) are used by use cases and use none.
func TestUseCasesMeetThroughResults(t *testing.T) {
	t.Parallel()
	useCases := []string{"acceptance", "canary", "capacity", "comparison", "merge", "readiness"}
	outputs := []string{"report", "evidence"}
	pkgs := packages(t)
	for path, p := range pkgs {
		var root string
		for _, r := range slices.Concat(useCases, outputs) {
			if within(path, r) {
				root = r
			}
		}
		if root == "" {
			continue
		}
		for _, imp := range imports(p) {
			for _, uc := range useCases {
				if within(imp, uc) && uc != root {
					t.Errorf("%s imports use case %s: share what they need through results", path, imp)
				}
			}
		}
	}
	for _, r := range slices.Concat(useCases, outputs) {
		if _, ok := pkgs[r]; !ok {
			t.Errorf("package %s not found: update this list", r)
		}
	}
}

// Every results file name is a constant of package results: a string
// literal equal to one of them anywhere else is a second definition.
func TestResultsFileNamesOnlyInResults(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	res, ok := pkgs["results"]
	if !ok {
		t.Fatal("package results not found")
	}
	names := map[string]bool{}
	for _, f := range res.GoFiles {
		file := parse(t, filepath.Join(res.Dir, f))
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					if s, ok := stringLit(v); ok && strings.Contains(s, ".") && !strings.ContainsAny(s, "/ ") {
						names[s] = true
					}
				}
			}
		}
	}
	for _, want := range []string{"summary.json", "requests.jsonl", "sweep.json", "report.html"} {
		if !names[want] {
			t.Fatalf("results defines no constant %q: the rule would check nothing", want)
		}
	}
	for path, p := range pkgs {
		// The simulator and the benchmarks are not tailgate's results.
		if path == "results" || within(path, "sim") || within(path, "bench") {
			continue
		}
		for _, f := range p.GoFiles {
			name := filepath.Join(p.Dir, f)
			ast.Inspect(parse(t, name), func(n ast.Node) bool {
				if s, ok := stringLit(n); ok && names[s] {
					t.Errorf("%s: literal %q: use the results constant", strings.TrimPrefix(name, filepath.Dir(filepath.Dir(res.Dir))+"/"), s)
				}
				return true
			})
		}
	}
}

func parse(t *testing.T, name string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func stringLit(n ast.Node) (string, bool) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// Imports kept where they belong: terminal drawing only in cmd/, no
// Prometheus server code outside tests (the tests run a real one), the
// OpenTelemetry Collector only in the test helper that assembles one (its
// module graph stays out of the binary), and nothing of the deprecated
// io/ioutil.
func TestImportBounds(t *testing.T) {
	t.Parallel()
	for path, p := range packages(t) {
		for _, imp := range p.Imports {
			switch {
			case imp == "io/ioutil":
				t.Errorf("%s imports io/ioutil: use io and os", path)
			case within(imp, "github.com/schollz/progressbar/v3") && !within(path, "cmd"):
				t.Errorf("%s imports %s: progress display belongs to cmd/ (pipeline.Progress is the seam)", path, imp)
			case strings.HasPrefix(imp, "github.com/prometheus/prometheus/"):
				t.Errorf("%s imports %s: the Prometheus server's code is for tests only", path, imp)
			case strings.HasPrefix(imp, "go.opentelemetry.io/collector/") && path != "internal/collectortest":
				t.Errorf("%s imports %s: the Collector's code is for tests only, through internal/collectortest", path, imp)
			}
		}
	}
}
