package merge

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
	"github.com/tailgate-llm/tailgate/results"
)

// combine puts the shards on the earliest one's clock: counts add up, the
// run spans the latest end, and the busiest generator's host load and
// the first stop stand for the merge.
func TestCombine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(i int, started time.Duration, elapsed time.Duration, sent int64, own float64, stopped error) *shard {
		return &shard{dir: results.Dir("shard" + string(rune('0'+i))), h: &results.Histograms{},
			m: measure.NewMetrics(),
			info: loadgen.Info{Started: t0.Add(started), Elapsed: elapsed, Sent: sent, Dropped: 1, Shard: loadgen.Shard{Index: i, Count: 2},
				Host: selfcheck.HostLoad{WindowS: 10, Cores: 4, OwnCores: own, Source: "/proc"}, Stopped: stopped,
				StageScheduled: map[string]time.Duration{"s": elapsed}}}
	}
	stop := errors.New("sink failed")
	shards := []*shard{mk(0, time.Second, 10*time.Second, 5, 1, nil), mk(1, 0, 12*time.Second, 7, 3, stop)}
	_, info, merged := combine(shards)
	if !info.Started.Equal(t0) || info.Elapsed != 12*time.Second {
		t.Errorf("started %v elapsed %v, want %v and 12s (shard 1 starts first; shard 0 ends at 11s)", info.Started, info.Elapsed, t0)
	}
	if info.Sent != 12 || info.Dropped != 2 {
		t.Errorf("sent %d dropped %d, want 12 and 2", info.Sent, info.Dropped)
	}
	if info.Host.OwnCores != 3 || !strings.Contains(info.Host.Source, "shard 1") {
		t.Errorf("host load %+v: want shard 1's, the busiest", info.Host)
	}
	if !errors.Is(info.Stopped, stop) || !strings.Contains(info.Stopped.Error(), "shard 1") {
		t.Errorf("stopped %v: want shard 1's error, named", info.Stopped)
	}
	if info.StageScheduled["s"] != 12*time.Second {
		t.Errorf("stage scheduled %v, want the longest, 12s", info.StageScheduled["s"])
	}
	if merged.Count != 2 || len(merged.Shards) != 2 || merged.Shards[0].Sent != 5 {
		t.Errorf("merged %+v", merged)
	}
}
