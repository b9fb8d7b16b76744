package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/slo"
)

func TestCheckConnections(t *testing.T) {
	l := hostLimits{files: 20000, filesHard: 20000, ports: 28232, portRange: "32768–60999"}
	for _, c := range []struct {
		need int64
		lim  hostLimits
		want string // "" for none
	}{
		{0, l, ""},
		{16384, l, ""},
		{32768, l, "need about 32832 open files, but this process may open 20000 (RLIMIT_NOFILE, hard limit 20000): raise the limit (ulimit -n) or split the load into shards (--shard I/N)"},
		{30000, hostLimits{files: 1 << 20, filesHard: 1 << 20, ports: 28232, portRange: "32768–60999"}, "the kernel has 28232 ephemeral ports (ip_local_port_range 32768–60999): split the load into shards (--shard I/N), each toward its own server address (--connect-to)"},
		{30000, hostLimits{}, ""}, // limits unknown: nothing to refuse on
	} {
		err := checkConnections(c.need, c.lim)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("need %d: %v, want %q", c.need, err, c.want)
		}
	}
	closed := loadgen.Options{Closed: true, Stages: []loadgen.Stage{{Concurrency: 100}, {Concurrency: 32768}}}
	if n := plannedConnections("openai-chat", closed); n != 32768 {
		t.Errorf("closed loop: %d connections, want the peak stage's 32768", n)
	}
	closed.Shard = loadgen.Shard{Index: 1, Count: 4}
	if n := plannedConnections("openai-chat", closed); n != 8192 {
		t.Errorf("shard 1/4: %d connections, want 8192", n)
	}
	if n := plannedConnections(kserve.APIGRPC, closed); n != 0 {
		t.Errorf("gRPC multiplexes: %d connections counted", n)
	}
	if n := plannedConnections("openai-chat", loadgen.Options{Stages: []loadgen.Stage{{Rate: 1e6}}}); n != 0 {
		t.Errorf("open loop: %d connections counted", n)
	}
}

// A closed loop beyond this process's open-file limit is refused before
// any connection, naming both numbers: the target here answers nothing, so
// a check after the preflight would fail differently. As shards, the same
// load passes the check.
func TestConcurrencyBeyondFileLimitRefused(t *testing.T) {
	l := readHostLimits()
	if l.files <= 0 || l.files > 1<<20 {
		t.Skipf("open-file limit %d: nothing to exceed", l.files)
	}
	over := strconv.FormatInt(l.files+1, 10)
	dead := "http://127.0.0.1:1"
	code, _, stderr := tgCmd("run", "--target", dead, "--model", "m", "--concurrency", over, "--duration", "1s", "--out", t.TempDir())
	if code != slo.ExitUsage || !strings.Contains(stderr, over+" concurrent streams") || !strings.Contains(stderr, "may open "+strconv.FormatInt(l.files, 10)) {
		t.Errorf("run: exit %d: %s", code, stderr)
	}
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	mix, _ := filepath.Abs("../../testdata/mixes/chat.yaml")
	sloFile, _ := filepath.Abs("../../testdata/slo/chat.yaml")
	os.WriteFile(plan, []byte("kind: Plan\nname: p\ntarget: "+dead+"\nmodel: m\nslo: "+sloFile+"\nmix: "+mix+"\nstages:\n  - {name: peak, concurrency: "+over+", duration: 1s}\n"), 0o644)
	code, _, stderr = tgCmd("validate", "--plan", plan, "--out", t.TempDir())
	if code != slo.ExitUsage || !strings.Contains(stderr, over+" concurrent streams") {
		t.Errorf("validate: exit %d: %s", code, stderr)
	}
	code, _, stderr = tgCmd("sweep", "--target", dead, "--model", "m", "--slo", sloFile, "--levels", "c4,c"+over, "--out", t.TempDir())
	if code != slo.ExitUsage || !strings.Contains(stderr, over+" concurrent streams") {
		t.Errorf("sweep: exit %d: %s", code, stderr)
	}
	// Four shards: each holds a quarter, under the limit; what fails then is
	// the dead target, not the check.
	code, _, stderr = tgCmd("run", "--target", dead, "--model", "m", "--concurrency", over, "--shard", "0/4", "--duration", "1s", "--out", t.TempDir())
	if strings.Contains(stderr, "concurrent streams need") {
		t.Errorf("shard 0/4 refused by the limit check: exit %d: %s", code, stderr)
	}
}

// --preconnect auto opens a connection per closed-loop worker (this
// shard's), past the open loop's cap on requests in flight, and one
// second of the open loop's rate within that cap.
func TestPreconnectAutoCount(t *testing.T) {
	t.Parallel()
	closed := loadgen.Options{Closed: true, MaxInFlight: loadgen.DefaultMaxInFlight, Stages: []loadgen.Stage{{Concurrency: 65536}},
		Shard: loadgen.Shard{Index: 0, Count: 4}}
	if n, err := preconnectCount("auto", closed); err != nil || n != 16384 {
		t.Errorf("closed loop, shard 0/4 of 65536 workers: %d connections (%v), want 16384", n, err)
	}
	open := loadgen.Options{MaxInFlight: 100, Stages: []loadgen.Stage{{Rate: 500}}}
	if n, err := preconnectCount("auto", open); err != nil || n != 100 {
		t.Errorf("open loop at 500/s capped at 100 in flight: %d connections (%v), want 100", n, err)
	}
	if n, err := preconnectCount("12", open); err != nil || n != 12 {
		t.Errorf("a count: %d (%v), want 12", n, err)
	}
}
