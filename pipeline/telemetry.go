package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/telemetry"
	"github.com/tailgate-llm/tailgate/theater"
)

// telemetryRun samples the server beside the load: telemetry.jsonl as
// samples arrive, and a snapshot at the start of each stage's measured part
// (after the warm-up) so each stage gets its own queue-delay increase.
type telemetryRun struct {
	run   *telemetry.Run
	jsonl *results.JSONLWriter

	mu      sync.Mutex
	werr    error // first telemetry.jsonl failure
	lost    int64 // samples not written after it
	points  []point
	snaps   []telemetry.Snapshot // snaps[i] taken at points[i]
	stopped chan struct{}
	wg      sync.WaitGroup
	// startedAt is the sampler's zero; all is every snapshot, the final
	// one included, once stopped.
	startedAt time.Time
	all       []telemetry.Snapshot
}

type point struct {
	at    time.Duration
	stage string
}

// measuredStarts lists, in order, where each stage's measured part starts:
// its start, or the warm-up's end inside it. A stage that is all warm-up
// has none.
func measuredStarts(o loadgen.Options) []point {
	var pts []point
	var begin time.Duration
	for _, st := range o.Stages {
		end := begin + st.Duration
		from := max(begin, o.WarmupDuration)
		if from < end {
			pts = append(pts, point{from, st.Name})
		}
		begin = end
	}
	return pts
}

func startTelemetry(ctx context.Context, cfg telemetry.Config, out results.Dir, o loadgen.Options, det *theater.Detector) (*telemetryRun, error) {
	t := &telemetryRun{points: measuredStarts(o), stopped: make(chan struct{})}
	if out != "" {
		w, err := results.CreateJSONL(out.Path(results.TelemetryFile))
		if err != nil {
			return nil, err
		}
		t.jsonl = w
	}
	// The sampler calls the sink on its one goroutine; jsonl is closed only
	// after Stop, which waits for it.
	var mark theater.QueueMark
	t.run = telemetry.Start(context.WithoutCancel(ctx), cfg, func(s telemetry.Sample) {
		theaterSample(det, s, &mark)
		if t.jsonl == nil {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.werr != nil {
			t.lost++
			return
		}
		t.werr = t.jsonl.Write(s)
	})
	start := time.Now()
	t.startedAt = start
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for _, p := range t.points {
			if d := time.Until(start.Add(p.at)); d > 0 {
				timer := time.NewTimer(d)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					return
				case <-t.stopped:
					timer.Stop()
					return
				}
			}
			// A stage measured from the run's start counts from the
			// sampler's start (nothing counted yet): a snapshot taken now
			// could already hold the first requests' queue times.
			var snap telemetry.Snapshot
			if p.at > 0 {
				snap = t.run.Snapshot()
			}
			t.mu.Lock()
			t.snaps = append(t.snaps, snap)
			t.mu.Unlock()
		}
	}()
	return t, nil
}

func (t *telemetryRun) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.werr
}

// stop ends sampling: the summary, each measured stage's queue-delay
// increase, and the telemetry.jsonl failure if there was one.
func (t *telemetryRun) stop() (telemetry.Summary, map[string]*telemetry.Histogram, *SinkError) {
	close(t.stopped)
	t.wg.Wait()
	final := t.run.Snapshot()
	sum := t.run.Stop()
	t.mu.Lock()
	snaps := append(t.snaps, final)
	t.all = snaps
	t.mu.Unlock()
	qd := map[string]*telemetry.Histogram{}
	for i := 0; i+1 < len(snaps); i++ {
		d := telemetry.Delta(snaps[i], snaps[i+1])
		if len(d.Buckets) > 0 || d.Count > 0 || d.Missing != "" {
			qd[t.points[i].stage] = &d
		}
	}
	var serr *SinkError
	if t.jsonl != nil {
		cerr := t.jsonl.Close()
		t.mu.Lock()
		if t.werr == nil {
			t.werr = cerr
		}
		if t.werr != nil {
			serr = &SinkError{Sink: t.jsonl.Path(), Err: t.werr, Lost: t.lost}
		}
		t.mu.Unlock()
	}
	return sum, qd, serr
}

// energy is each measured stage's energy window, by stage name (after
// stop; none without an energy reading).
func (t *telemetryRun) energy() map[string]*telemetry.EnergyWindow {
	out := map[string]*telemetry.EnergyWindow{}
	for i := 0; i+1 < len(t.all); i++ {
		if w := telemetry.EnergyDelta(t.all[i].Energy, t.all[i+1].Energy); w != nil {
			out[t.points[i].stage] = w
		}
	}
	return out
}

// theaterSample feeds one telemetry round to the metric-theater detector:
// local GPUs (NVML) when sampled, else the endpoint's, as the telemetry
// summary chooses.
func theaterSample(det *theater.Detector, s telemetry.Sample, mark *theater.QueueMark) {
	var util []float64
	for _, g := range s.GPUs {
		if g.Utilization != nil {
			util = append(util, *g.Utilization)
		}
	}
	if len(util) == 0 && s.Server != nil {
		for _, g := range s.Server.GPUs {
			if g.Utilization != nil {
				util = append(util, *g.Utilization)
			}
		}
	}
	if s.Server != nil && s.Server.QueueDelay != nil {
		det.Sample(s.Elapsed, util, s.Server.QueueDelay.Sum, s.Server.QueueDelay.Count, mark)
	} else {
		det.Sample(s.Elapsed, util, 0, 0, nil)
	}
}
