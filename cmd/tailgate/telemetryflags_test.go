package main

import (
	"io"
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
