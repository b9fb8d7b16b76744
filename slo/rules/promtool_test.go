package rules

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/promtest"
)

// generatedDir writes the rules that Generate makes now for every golden
// case, under the golden names, beside copies of the promtool unit-test
// files, so promtool tests this code rather than yesterday's goldens.
func generatedDir(t *testing.T) (dir string, rules, tests []string) {
	t.Helper()
	dir = t.TempDir()
	for _, c := range goldenCases {
		p, err := generateWith(t, c.spec, c.opts).Prometheus()
		if err != nil {
			t.Fatal(err)
		}
		name := c.name + ".rules.yaml"
		if err := os.WriteFile(filepath.Join(dir, name), p, 0o644); err != nil {
			t.Fatal(err)
		}
		rules = append(rules, name)
	}
	files, _ := filepath.Glob("testdata/*.test.yaml")
	if len(files) == 0 {
		t.Fatal("no promtool unit tests in testdata/")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, filepath.Base(f))
	}
	return dir, rules, tests
}

func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtest.Promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// promtool check rules: the rule files parse, every expression is valid
// PromQL, and no two rules record the same series (its lint).
func TestPromtoolCheckRules(t *testing.T) {
	promtest.Promtool(t)
	dir, rules, _ := generatedDir(t)
	out := runPromtool(t, dir, append([]string{"check", "rules"}, rules...)...)
	if strings.Count(out, "SUCCESS") != len(rules) {
		t.Fatalf("promtool check rules:\n%s", out)
	}
}

// promtool test rules: the unit tests in testdata/*.test.yaml, whose series
// prove the alerts fire when they should and stay quiet when they should
// not (see each file's comments): a burn over 14.4× pages within minutes,
// an outage pages at minute nine, 1× never pages, slow burns ticket, and
// 28-day windows get other factors than 30-day ones.
func TestPromtoolTestRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs promtool over every generated rule test")
	}
	promtest.Promtool(t)
	dir, _, tests := generatedDir(t)
	out := runPromtool(t, dir, append([]string{"test", "rules"}, tests...)...)
	if strings.Count(out, "SUCCESS") != len(tests) {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}
