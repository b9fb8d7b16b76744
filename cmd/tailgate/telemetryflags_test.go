package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// --server-model names the model whose server metrics count the run's
// requests (a Triton ensemble); without it, the run's --model.
func TestServerModelFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nvml", "off"}, "llama"},
		{[]string{"--nvml", "off", "--server-model", "ensemble"}, "ensemble"},
	} {
		var tel telemetryFlags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		tel.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := tel.config("http://127.0.0.1:9/v1", "llama", nil, io.Discard)
		if err != nil || cfg == nil {
			t.Fatalf("%v: %v %v", tc.args, cfg, err)
		}
		if cfg.ServerModel != tc.want {
			t.Errorf("%v: server model %q, want %q", tc.args, cfg.ServerModel, tc.want)
		}
	}
}

// A bad telemetry flag is a usage error before any connection: the target
// here refuses connections, so an error about it would mean the command
// dialled first.
func TestTelemetryFlagsCheckedBeforeConnecting(t *testing.T) {
	dir := t.TempDir()
	target := "http://127.0.0.1:1/v1"
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"run", "--target", target, "--rate", "1", "--duration", "1s", "--gpu-hour-cost", "-1"}, "--gpu-hour-cost"},
		{[]string{"sweep", "--target", target, "--slo", "../../testdata/slo/chat.yaml", "--levels", "1,2", "--out", dir, "--gpu-hour-cost", "NaN"}, "--gpu-hour-cost"},
		{[]string{"validate", "--plan", "../../testdata/plans/demo.yaml", "--out", dir, "--telemetry-interval", "0s"}, "--telemetry-interval"},
		{[]string{"run", "--target", target, "--rate", "1", "--duration", "1s", "--nvml", "maybe"}, "--nvml"},
	} {
		code, _, errOut := tgCmd(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.flag) || strings.Contains(errOut, "127.0.0.1:1") {
			t.Errorf("%s: exit %d, %q: want a usage error about %s before any connection", tc.args[0], code, errOut, tc.flag)
		}
	}
}
