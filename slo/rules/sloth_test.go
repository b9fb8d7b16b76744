package rules

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// With Sloth on PATH (go install github.com/slok/sloth/cmd/sloth@v0.16.0),
// Sloth's rules from our Sloth spec are ours, up to three known
// differences: Sloth writes the error budget as 1-0.99 and burn factors
// with float noise (5.6000000000000005), where we write the file's exact
// decimals; and sloth_slo_info says sloth_spec tailgate/v1 and tailgate's
// version. Two more by design: our alert expressions add the ticket's
// early-life gate and the hold while the canary is gone (condition), so
// alerts compare by name and labels only; and the canary's own alerts
// (group tailgate-canary-*) are ours alone. CI has no Sloth (no Debian
// package): the test skips.
func TestSlothGeneratesOurRules(t *testing.T) {
	sloth, err := exec.LookPath("sloth")
	if err != nil {
		t.Skip("sloth not on PATH (go install github.com/slok/sloth/cmd/sloth@v0.16.0 to run this)")
	}
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			r := generateWith(t, c.spec, c.opts)
			spec, _ := r.Sloth()
			in := filepath.Join(t.TempDir(), "spec.yaml")
			os.WriteFile(in, spec, 0o644)
			out, err := exec.Command(sloth, "generate", "--no-log", "-i", in, "--default-slo-period="+Days(r.Spec.Window)).Output()
			if err != nil {
				t.Fatalf("sloth generate: %v", err)
			}
			ours, _ := r.Prometheus()
			want, got := ruleSet(t, ours), ruleSet(t, out)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s:\n  ours:  %s\n  Sloth: %s", k, v, got[k])
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("only Sloth writes %s", k)
				}
			}
		})
	}
}

var (
	numberRE = regexp.MustCompile(`\b\d+\.\d+\b`)
	budgetRE = regexp.MustCompile(`^vector\(1-([0-9.]+)\)$`)
)

// ruleSet maps group/rule/labels to the normalised expression.
func ruleSet(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var f File
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		if strings.HasPrefix(g.Name, "tailgate-canary-") {
			continue
		}
		for _, r := range g.Rules {
			var ls []string
			for k, v := range r.Labels {
				if r.Record == RecordInfo && (k == "sloth_spec" || k == "sloth_version") {
					continue
				}
				ls = append(ls, k+"="+v)
			}
			sort.Strings(ls)
			e := strings.Join(strings.Fields(r.Expr), " ")
			if m := budgetRE.FindStringSubmatch(e); m != nil {
				x, _ := strconv.ParseFloat(m[1], 64)
				e = "vector(" + strconv.FormatFloat(1-x, 'g', 12, 64) + ")"
			}
			e = numberRE.ReplaceAllStringFunc(e, func(n string) string {
				x, _ := strconv.ParseFloat(n, 64)
				return strconv.FormatFloat(x, 'g', 12, 64)
			})
			if r.Alert != "" {
				e = "(alert: expression not compared)"
			}
			out[g.Name+" "+r.Record+r.Alert+" {"+strings.Join(ls, ",")+"}"] = e
		}
	}
	return out
}
