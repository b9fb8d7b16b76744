package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
)

// scaleFlags are run's flags for running one schedule on many machines
// (--shard, --start-at), bounding what it writes (--records,
// --records-compress) and opening connections before the first start
// (--preconnect).
type scaleFlags struct {
	shard, startAt    string
	records, compress string
	preconnect        string
}

func (s *scaleFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&s.shard, "shard", "", "run shard I/N (0-based) of the schedule: every shard draws the same schedule and prompts\nand sends the requests whose sequence number is ≡ I mod N; merge the shards' --out with tailgate merge")
	fs.StringVar(&s.startAt, "start-at", "", "start the schedule at this RFC 3339 instant (every shard the same); a late start is kept and said")
	fs.StringVar(&s.records, "records", "full", results.RecordsFile+" form: full (every chunk instant), compact (per-request figures; no ICL/ITL re-judging) or none")
	fs.StringVar(&s.compress, "records-compress", "none", "compress "+results.RecordsFile+" as it is written: none, gzip (.gz) or zstd (.zst)")
	fs.StringVar(&s.preconnect, "preconnect", "", "open connections before the first intended start (set-up time reported apart):\nauto (the closed loop's concurrency, or one second of the peak open-loop rate) or a count")
	fs.Lookup("preconnect").NoOptDefVal = "auto"
}

// registerShard registers --shard and --start-at alone (validate).
func (s *scaleFlags) registerShard(fs *pflag.FlagSet) {
	fs.StringVar(&s.shard, "shard", "", "run shard I/N (0-based) of every stage; merge the shards' --out with tailgate merge for one verdict")
	fs.StringVar(&s.startAt, "start-at", "", "start the first stage at this RFC 3339 instant (every shard the same); each later stage at\nits predecessors' durations and graces plus 2s after it, so the shards of every stage start together")
}

// shardOptions parses --shard and --start-at.
func (s *scaleFlags) shardOptions() (loadgen.Shard, time.Time, error) {
	var sh loadgen.Shard
	var at time.Time
	if s.shard != "" {
		v, err := loadgen.ParseShard(s.shard)
		if err != nil {
			return sh, at, fmt.Errorf("--shard: %w", err)
		}
		sh = v
	}
	if s.startAt != "" {
		t, err := time.Parse(time.RFC3339Nano, s.startAt)
		if err != nil {
			return sh, at, fmt.Errorf("--start-at %q: want an RFC 3339 instant, e.g. 2026-12-03T07:00:00Z", s.startAt)
		}
		at = t
	}
	return sh, at, nil
}

// apply sets the pipeline spec from the flags; stderr hears when the run
// waits for --start-at.
func (s *scaleFlags) apply(ps *pipeline.Spec, identity map[string]string, stderr io.Writer) error {
	o := &ps.Options
	sh, t, err := s.shardOptions()
	if err != nil {
		return err
	}
	o.Shard = sh
	if !t.IsZero() {
		o.StartAt = t
		if wait := time.Until(t); wait > 0 {
			fmt.Fprintf(stderr, "waiting %v for --start-at %s\n", wait.Round(time.Millisecond), s.startAt)
		} else {
			fmt.Fprintf(stderr, "warning: --start-at %s was %v ago: this shard starts late, its first requests charged the lateness\n", s.startAt, (-wait).Round(time.Millisecond))
		}
	}
	form, err := results.ParseRecordsForm(s.records)
	if err != nil {
		return fmt.Errorf("--records: %w", err)
	}
	comp, err := results.ParseCompression(s.compress)
	if err != nil {
		return fmt.Errorf("--records-compress: %w", err)
	}
	ps.Records, ps.RecordsCompression = form, comp
	if s.preconnect != "" {
		pc, ok := ps.Client.(loadgen.Preconnector)
		if !ok {
			return fmt.Errorf("--preconnect: this protocol's client cannot open connections ahead")
		}
		n, err := preconnectCount(s.preconnect, *o)
		if err != nil {
			return err
		}
		o.Preconnect = func(ctx context.Context) (int, error) { return pc.Preconnect(ctx, n) }
		o.PreconnectConns = n
	}
	ps.Identity = identity
	return nil
}

// preconnectCount is how many connections --preconnect opens: a count, or
// auto: the closed loop's largest concurrency (this shard's workers), or
// one second of the peak open-loop rate (this shard's share), within the
// in-flight cap.
func preconnectCount(v string, o loadgen.Options) (int, error) {
	if v != "auto" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("--preconnect %q: want auto or a count ≥ 1", v)
		}
		return n, nil
	}
	peak := 0.0
	for _, st := range o.Stages {
		if o.Closed {
			peak = max(peak, float64(o.Shard.Share(int64(st.Concurrency))))
		} else {
			peak = max(peak, st.Rate)
		}
	}
	if !o.Closed && o.Shard.Active() {
		peak /= float64(o.Shard.Count)
	}
	n := int(math.Ceil(peak))
	// The cap on requests in flight is the open loop's; a closed loop holds
	// every worker's connection at once, however many.
	if lim := o.MaxInFlight; !o.Closed && lim > 0 && n > lim {
		n = lim
	}
	return max(n, 1), nil
}

// promptIdentity names what a run sends, for merge's check that shards
// ran the same schedule: the mix's hash, or the prompt text's.
func promptIdentity(mix *prompts.Mix, prompt string) map[string]string {
	if mix != nil {
		return map[string]string{"mix": mix.Name() + " sha256:" + mix.Hash(), "mix.seed": strconv.FormatInt(mix.Seed(), 10)}
	}
	h := sha256.Sum256([]byte(prompt))
	return map[string]string{"prompt": "sha256:" + hex.EncodeToString(h[:])}
}
