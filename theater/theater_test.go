package theater_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
	"github.com/tailgate-llm/tailgate/theater"
)

// The simulator steps in 2 ms + 0.5 ms per running sequence: 16-token
// answers saturate it at 1/(16 × 0.5 ms) = 125 req/s. Its GPU reads busy
// whenever a step runs, so it is near 100% at 40 req/s too (a third of capacity): utilisation
// alone cannot tell the two runs apart, the queue can.
// run loads the simulator at rate for 6 s; call it in a synctest bubble,
// where the simulator's steps and the run's clock are exact.
func run(t *testing.T, rate float64) *theater.Section {
	t.Helper()
	c := sim.DefaultConfig()
	c.PrefillBase, c.PrefillPerToken = 0, 0
	c.DecodeBase, c.DecodePerSeq = 2*time.Millisecond, 500*time.Microsecond
	c.TruthLimit = -1
	srv := simtest.StartPipe(t, c)
	cl, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{Dial: srv.Dial}}, Model: "m", MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	res, err := pipeline.Run(context.Background(), pipeline.Spec{Client: cl,
		Source: &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hi"}},
		Options: loadgen.Options{Stages: []loadgen.Stage{{Name: "main", Rate: rate, Duration: 6 * time.Second}},
			Arrival: loadgen.ArrivalConstant, Grace: time.Second, Timeout: 10 * time.Second},
		Telemetry: &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: srv.URL + "/metrics"}}, Interval: 250 * time.Millisecond, Dial: srv.Dial},
		Theater:   theater.Options{Bucket: 2 * time.Second},
		Validity:  slo.Unbounded()})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary.MetricTheater
	if s == nil {
		t.Fatal("no metric_theater section")
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	t.Logf("%g req/s: capacity section:\n%s\nwarnings: %q", rate, b, res.Summary.Warnings)
	return s
}

func TestRuleFloors(t *testing.T) {
	d := theater.New(theater.Options{Bucket: time.Second})
	for i := range 4 {
		at := time.Duration(i)*time.Second + 500*time.Millisecond
		d.GPU(at, 0.95)
		// Queue delay 2 → 4 → 8 → 60 ms: only the last step is 10 ms more.
		d.Queue(at, []float64{2, 4, 8, 60}[i], 10)
		d.Request("chat", at, 10*time.Millisecond)
	}
	s := d.Section()
	if s.Flagged != 1 || !s.Buckets[3].Flag || s.Warning() == "" {
		t.Errorf("%+v", s)
	}
	// No GPU samples: nothing flagged, and the note says why.
	d = theater.New(theater.Options{})
	d.Queue(time.Second, 5, 1)
	d.Queue(15*time.Second, 500, 1)
	if s := d.Section(); s.MetricTheater || s.Note == "" {
		t.Errorf("without GPU: %+v", s)
	}
}

// One slow request in a bucket of 80 is that bucket's p99: the TTFT tail
// judged there is the quantile with 10 requests beyond it, which one
// request cannot move; a bucket where most requests slowed is flagged.
func TestOneSlowRequestIsNotATail(t *testing.T) {
	run := func(slow int) *theater.Section {
		d := theater.New(theater.Options{Bucket: time.Second})
		for b := range 2 {
			d.GPU(time.Duration(b)*time.Second+500*time.Millisecond, 0.95)
			for i := range 80 {
				at := time.Duration(b)*time.Second + time.Duration(i)*10*time.Millisecond
				ttft := 8 * time.Millisecond
				if b == 1 && i < slow {
					ttft = 40 * time.Millisecond
				}
				d.Request("chat", at, ttft)
			}
		}
		return d.Section()
	}
	if s := run(1); s.MetricTheater {
		t.Errorf("one slow request of 80 flagged: %+v", s.Buckets)
	}
	s := run(60)
	if !s.MetricTheater || s.Buckets[1].TTFTTailQuantile != 0.875 || !strings.Contains(s.Buckets[1].Why, "TTFT p87.5 8 → 40 ms") {
		t.Errorf("60 slow requests of 80: %+v", s.Buckets)
	}
}

// In a synctest bubble over pipes (simtest.StartPipe), so the simulator's
// model holds exactly whatever the machine's load.
func TestMetricTheaterPastCapacityNotAtLowLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	synctest.Test(t, func(t *testing.T) {
		low := run(t, 40)
		if low.MetricTheater {
			t.Errorf("flagged at 40 req/s (32%% of capacity)")
		}
		busy := false
		for _, b := range low.Buckets {
			if b.GPUUtilization != nil && *b.GPUUtilization >= 0.8 {
				busy = true
			}
		}
		if !busy {
			t.Errorf("the simulator's GPU was not busy at low load: the test shows nothing")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		if high := run(t, 200); !high.MetricTheater {
			t.Errorf("not flagged at 200 req/s (1.6× capacity)")
		}
	})
}
