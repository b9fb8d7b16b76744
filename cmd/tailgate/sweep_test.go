package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/sim"
)

// capacitySim steps in 2 ms + 0.5 ms per running sequence, with free prefill:
// 16-token answers saturate it at 1/(16 × 0.5 ms) = 125 req/s (see
// capacity/sweep_test.go for the derivation).
func capacitySim() sim.Config {
	c := sim.DefaultConfig()
	c.PrefillBase, c.PrefillPerToken = 0, 0
	c.DecodeBase, c.DecodePerSeq = 2*time.Millisecond, 500*time.Microsecond
	c.TruthLimit = -1
	return c
}

func TestSweepUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--from", "5", "--to", "10"}, "--slo and --out are required"},
		{[]string{"sweep", "--slo", "x", "--out", "y"}, "give a range"},
		{[]string{"sweep", "--slo", "x", "--out", "y", "--from", "c4", "--to", "10"}, "both rates or both concurrencies"},
		{[]string{"sweep", "--slo", "x", "--out", "y", "--levels", "c4,10"}, "mix rates and concurrencies"},
		{[]string{"sweep", "--slo", "x", "--out", "y", "--levels", "5", "--forecast-growth", "8%/month"}, "needs --current-rate"},
	} {
		code, _, e := tgCmd(c.args...)
		if code != exitUsage || !strings.Contains(e, c.want) {
			t.Errorf("%v: %d %q, want usage error %q", c.args, code, e, c.want)
		}
	}
}
