package telemetry

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBuildsAndStubWorksWithoutCgo checks the promise that lets the rest
// of the module build with CGO_ENABLED=0: without cgo this package does not
// import go-nvml, compiles, and its stub NewNVML reports ErrNoNVML.
func TestBuildsAndStubWorksWithoutCgo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the package again with CGO_ENABLED=0")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := []string{"CGO_ENABLED=0"}
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			kv = "GOFLAGS=" + strings.ReplaceAll(v, "-race", "") // -race needs cgo
		}
		env = append(env, kv)
	}
	run := func(args ...string) string {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Env = append(env, "CGO_ENABLED=0") // last one wins
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("CGO_ENABLED=0 go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if deps := run("list", "-deps", "."); strings.Contains(deps, "go-nvml") {
		t.Errorf("without cgo the package still imports go-nvml:\n%s", deps)
	}
	out := run("test", "-count=1", "-run", "^TestStubNewNVML$", "-v", ".")
	if !strings.Contains(out, "--- PASS: TestStubNewNVML") {
		t.Errorf("stub test did not run:\n%s", out)
	}
}
