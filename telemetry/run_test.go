package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// serveFile serves a testdata fixture as /metrics and records the
// Authorization header it saw.
func serveFile(t *testing.T, name string) (*httptest.Server, *atomic.Value) {
	t.Helper()
	h, auth := fileHandler(t, name)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, auth
}

// fileHandler answers with a testdata fixture and records the
// Authorization header it saw.
func fileHandler(t *testing.T, name string) (http.Handler, *atomic.Value) {
	t.Helper()
	body, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var auth atomic.Value
	auth.Store("")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(body)
	}), &auth
}

// hangingHandler accepts scrapes and never answers them whole: headers
// and a partial body, then nothing until the client goes away.
func hangingHandler(t *testing.T) http.Handler {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("# TYPE vllm:num_requests_waiting gauge\n"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
}

// collector is a sink that keeps every Sample.
type collector struct {
	mu      sync.Mutex
	samples []Sample
}

func (c *collector) sink(s Sample) {
	c.mu.Lock()
	c.samples = append(c.samples, s)
	c.mu.Unlock()
}

func (c *collector) all() []Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Sample(nil), c.samples...)
}

// A source that never answers does not stall the others or the cadence.
// In a synctest bubble (fake clock, scrapes over net.Pipe) the rounds are
// exactly on their 100 ms grid.
func TestHangingSourceDoesNotStallSampling(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		goodH, auth := fileHandler(t, "vllm.prom")
		dial := pipeDialer(map[string]*pipeServer{"good:80": newPipeServer(t, goodH), "hang:80": newPipeServer(t, hangingHandler(t))})
		const interval = 100 * time.Millisecond
		hdr := http.Header{"Authorization": {"Bearer s3cret-token"}}
		hangURL := "http://user:pa55word@hang/metrics?token=qu3ry-secret"
		var c collector
		r := Start(context.Background(), Config{
			Scrapes:  []ScrapeConfig{{URL: "http://good/metrics", Headers: hdr}, {URL: hangURL, Headers: hdr, Timeout: time.Hour}},
			Interval: interval, Dial: dial,
		}, c.sink)
		time.Sleep(650 * time.Millisecond) // the fake clock: rounds at 0, 100, …, 600 ms
		sum := r.Stop()

		samples := c.all()
		if len(samples) != 8 { // and the final one
			t.Fatalf("%d samples, want 8", len(samples))
		}
		for i, s := range samples {
			if s.Server == nil || s.Server.Waiting == nil || *s.Server.Waiting != 7 {
				t.Fatalf("sample %d: healthy source missing: %+v", i, s.Server)
			}
			// The hung scrape runs on (it could still answer late): every
			// round says it is waiting, and the last one fails it.
			last := i == len(samples)-1
			if !last && (len(s.Errors) != 0 || len(s.Late) != 1 || !strings.Contains(s.Late[0], "no answer within 90ms yet")) {
				t.Errorf("sample %d errors %q late %q", i, s.Errors, s.Late)
			}
			if last && (len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "no answer by the end of sampling")) {
				t.Errorf("final sample errors %q", s.Errors)
			}
			if want := time.Duration(i) * interval; !last && s.Elapsed != want {
				t.Errorf("sample %d at %v, want %v", i, s.Elapsed, want)
			}
		}
		if sum.Samples != len(samples) || sum.ScrapeErrors != 1 || sum.Sources[1].Errors != 1 || sum.Sources[0].Errors != 0 || sum.LateScrapes != 0 {
			t.Errorf("summary counts: %+v", sum)
		}
		if got := auth.Load().(string); got != "Bearer s3cret-token" {
			t.Errorf("server saw Authorization %q", got)
		}
		js, _ := json.Marshal(sum)
		all := string(js)
		for _, s := range samples {
			b, _ := json.Marshal(s)
			all += string(b)
		}
		for _, secret := range []string{"s3cret", "pa55word", "qu3ry", "user:"} {
			if strings.Contains(all, secret) {
				t.Errorf("%q leaked into samples or summary", secret)
			}
		}
		if sum.Sources[1].Name != "http://hang/metrics" {
			t.Errorf("source name %q", sum.Sources[1].Name)
		}
	})
}

// fakeGPU is a GPUSampler without NVML; block makes Sample hang.
type fakeGPU struct {
	block chan struct{}
	calls atomic.Int32
}

func (f *fakeGPU) Sample() ([]GPUStat, error) {
	f.calls.Add(1)
	if f.block != nil {
		<-f.block
	}
	return []GPUStat{
		{Index: 0, Utilization: new(0.5), MemoryUsedBytes: new(uint64(10 << 30)), PowerWatts: new(300.0)},
		{Index: 1, Utilization: new(0.9), MemoryUsedBytes: new(uint64(20 << 30)), PowerWatts: new(500.0)},
	}, nil
}

func (f *fakeGPU) Devices() []GPUInfo {
	return []GPUInfo{{Index: 0, Name: "NVIDIA H200", UUID: "GPU-a", Serial: "1650924060001", DriverVersion: "550.54.15", CUDAVersion: "12.4"},
		{Index: 1, Name: "NVIDIA H200", UUID: "GPU-b", Serial: "1650924060002", DriverVersion: "550.54.15", CUDAVersion: "12.4"}}
}

func (f *fakeGPU) Close() {}

func TestRunSummaryWithServerDCGMAndGPU(t *testing.T) {
	t.Parallel()
	vllm, _ := serveFile(t, "vllm.prom")
	dcgm, _ := serveFile(t, "dcgm.prom")
	var c collector
	r := Start(context.Background(), Config{
		Scrapes:  []ScrapeConfig{{URL: vllm.URL + "/metrics"}, {URL: dcgm.URL + "/metrics"}},
		GPU:      &fakeGPU{},
		Interval: time.Hour, // rounds only at start, on Snapshot and at Stop
	}, c.sink)
	r.Snapshot()
	sum := r.Stop()
	if again := r.Stop(); again.Samples != sum.Samples {
		t.Error("second Stop differs")
	}
	if sum.Samples != 3 || len(c.all()) != 3 || sum.ScrapeErrors != 0 {
		t.Fatalf("samples %d (%d), errors %d %q", sum.Samples, len(c.all()), sum.ScrapeErrors, sum.Errors)
	}
	if sum.Family != "vllm" || len(sum.Sources) != 3 || sum.Sources[1].Family != "dcgm-exporter" || sum.Sources[2].Name != "nvml" {
		t.Errorf("family %q sources %+v", sum.Family, sum.Sources)
	}
	if sum.Running == nil || sum.Running.Mean != 21 || sum.Running.Max != 21 || sum.Running.P95 != 21 || sum.Running.N != 3 {
		t.Errorf("running %+v", sum.Running)
	}
	if sum.KVUsage == nil || !near(sum.KVUsage.Mean, 0.6) {
		t.Errorf("kv %+v", sum.KVUsage)
	}
	// The counters did not move: the run saw nothing happen.
	if sum.QueueDelay == nil || sum.QueueDelay.Count != 0 || sum.QueueDelay.P50Ms != nil {
		t.Errorf("queue delay %+v", sum.QueueDelay)
	}
	if sum.PromptTokens == nil || *sum.PromptTokens != 0 {
		t.Errorf("prompt tokens %v", sum.PromptTokens)
	}
	if sum.GPUUtilizationFrom != "nvml" || sum.GPUUtilization == nil || !near(sum.GPUUtilization.Mean, 0.7) {
		t.Errorf("gpu utilization %q %+v", sum.GPUUtilizationFrom, sum.GPUUtilization)
	}
	if len(sum.GPUs) != 5 || sum.GPUs[0].Source != "nvml" || sum.GPUs[0].UUID != "GPU-a" || sum.GPUs[1].PowerWatts.Mean != 500 {
		t.Fatalf("gpus %+v", sum.GPUs)
	}
	if g := sum.GPUs[2]; g.Source != sum.Sources[1].Name || g.GPU != "0" || g.Utilization == nil || !near(g.Utilization.Mean, 0.85) || !near(g.EngineActive.Mean, 0.78) {
		t.Errorf("dcgm gpu %+v", g)
	}
	if len(sum.Devices) != 2 || sum.Devices[1].Serial != "1650924060002" {
		t.Errorf("devices %+v", sum.Devices)
	}

	// The merged sample and its JSON line.
	s := c.all()[0]
	if s.Server.Family != "vllm" || len(s.Server.Sources) != 2 || len(s.Server.GPUs) != 3 || len(s.GPUs) != 2 {
		t.Fatalf("sample %+v", s.Server)
	}
	line, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"at":"`, `"t_s":`, `"server":{"family":"vllm","sources":[`, `"gpus":[{"index":0,"utilization":0.5`,
		`"memory_used_bytes":`, `"engine_active":0.78`} {
		if !strings.Contains(string(line), key) {
			t.Errorf("line lacks %s:\n%s", key, line)
		}
	}
	if strings.Contains(string(line), `"errors"`) {
		t.Errorf("empty errors written: %s", line)
	}
	var back Sample
	if err := json.Unmarshal(line, &back); err != nil || !back.At.Equal(s.At) || back.Elapsed != s.Elapsed.Round(time.Microsecond) ||
		*back.Server.Running != 21 || back.Server.QueueDelay.Count != 150 {
		t.Errorf("round trip: %v %+v", err, back)
	}
	if _, err := json.Marshal(sum); err != nil {
		t.Errorf("summary: %v", err)
	}
}

// sequence serves exposition texts; the test picks which with cur.
type sequence struct {
	texts []string
	cur   atomic.Int32
}

func (q *sequence) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Write([]byte(q.texts[q.cur.Load()]))
}

func queueText(counts [3]int, sum float64, prompt int) string {
	return "# TYPE vllm:request_queue_time_seconds histogram\n" +
		"vllm:request_queue_time_seconds_bucket{le=\"0.1\"} " + itoa(counts[0]) + "\n" +
		"vllm:request_queue_time_seconds_bucket{le=\"1\"} " + itoa(counts[1]) + "\n" +
		"vllm:request_queue_time_seconds_bucket{le=\"+Inf\"} " + itoa(counts[2]) + "\n" +
		"vllm:request_queue_time_seconds_sum " + ftoa(sum) + "\n" +
		"vllm:request_queue_time_seconds_count " + itoa(counts[2]) + "\n" +
		"# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total " + itoa(prompt) + "\n"
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func counts(h *Histogram) []uint64 {
	if h == nil {
		return nil
	}
	var out []uint64
	for _, b := range h.Buckets {
		out = append(out, b.Count)
	}
	return out
}

func TestSnapshotsAcrossAServerRestart(t *testing.T) {
	t.Parallel()
	seq := &sequence{texts: []string{
		queueText([3]int{50, 90, 100}, 40, 5000), // history before the run
		queueText([3]int{52, 95, 106}, 43, 5600), // +2, +5, +6; sum +3; +600 tokens
		queueText([3]int{1, 3, 4}, 1, 300),       // restart: +1, +3, +4; +1; +300
		queueText([3]int{3, 5, 7}, 2.5, 700),     // +2, +2, +3; +1.5; +400
	}}
	srv := httptest.NewServer(seq)
	defer srv.Close()
	r := Start(context.Background(), Config{Scrapes: []ScrapeConfig{{URL: srv.URL}}, Interval: time.Hour}, nil)
	s0 := r.Snapshot()
	if s0.QueueDelay == nil || s0.QueueDelay.Count != 0 || *s0.PromptTokens != 0 {
		t.Fatalf("s0 %+v", s0)
	}
	seq.cur.Store(1)
	s1 := r.Snapshot()
	seq.cur.Store(2)
	s2 := r.Snapshot()
	seq.cur.Store(3)
	s3 := r.Snapshot()
	sum := r.Stop()

	if d := Delta(s0, s1); d.Count != 6 || !near(d.Sum, 3) || !equalU(counts(&d), 2, 5, 6) {
		t.Errorf("s0→s1 %+v", d)
	}
	if d := Delta(s1, s2); d.Count != 4 || !near(d.Sum, 1) || !equalU(counts(&d), 1, 3, 4) {
		t.Errorf("s1→s2 (restart) %+v", d)
	}
	d := Delta(s0, s3)
	if d.Count != 13 || !near(d.Sum, 5.5) || !equalU(counts(&d), 5, 10, 13) || d.Source != "vllm:request_queue_time_seconds" {
		t.Errorf("s0→s3 %+v", d)
	}
	if *s3.PromptTokens != 1300 {
		t.Errorf("prompt tokens %v", *s3.PromptTokens)
	}
	if sum.CounterResets != 2 || sum.QueueDelay.Count != 13 || *sum.PromptTokens != 1300 {
		t.Errorf("summary resets %d queue %+v tokens %v", sum.CounterResets, sum.QueueDelay, *sum.PromptTokens)
	}
	// After Stop, Snapshot returns the final counts without blocking.
	if s := r.Snapshot(); s.QueueDelay.Count != 13 {
		t.Errorf("snapshot after stop %+v", s)
	}
}

func equalU(got []uint64, want ...uint64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestHangingGPUSamplerDoesNotStall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := &fakeGPU{block: make(chan struct{})}
		defer close(g.block)
		var c collector
		const interval = 100 * time.Millisecond
		r := Start(context.Background(), Config{GPU: g, Interval: interval}, c.sink)
		time.Sleep(450 * time.Millisecond) // the fake clock: rounds at 0, 100, …, 400 ms
		sum := r.Stop()
		samples := c.all()
		if len(samples) != 6 { // and the final one
			t.Fatalf("%d samples, want 6", len(samples))
		}
		// The first read hangs; later rounds do not pile up more calls.
		if n := g.calls.Load(); n != 1 {
			t.Errorf("%d Sample calls while the first hung", n)
		}
		if !strings.Contains(samples[0].Errors[0], "nvml: no answer within 90ms") ||
			!strings.Contains(samples[1].Errors[0], "previous sample still running") {
			t.Errorf("errors %q %q", samples[0].Errors, samples[1].Errors)
		}
		for i, s := range samples[:5] {
			if want := time.Duration(i) * interval; s.Elapsed != want {
				t.Errorf("sample %d at %v, want %v: the hung read held the cadence", i, s.Elapsed, want)
			}
		}
		if sum.ScrapeErrors != len(samples) || sum.Sources[0].Name != "nvml" || sum.Sources[0].Errors != len(samples) {
			t.Errorf("summary %+v", sum)
		}
	})
}

func TestContextCancelEndsSampling(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, _ := fileHandler(t, "sglang.prom")
		srv := newPipeServer(t, h)
		ctx, cancel := context.WithCancel(context.Background())
		var c collector
		const interval = 20 * time.Millisecond
		r := Start(ctx, Config{Scrapes: []ScrapeConfig{{URL: "http://sglang/metrics"}}, Interval: interval, Dial: srv.dial}, c.sink)
		// Snapshots from several goroutines while it runs (for the race detector).
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5 {
					if s := r.Snapshot(); s.Samples == 0 {
						t.Error("snapshot before any sample")
					}
				}
			})
		}
		wg.Wait()
		cancel()
		synctest.Wait() // the loop has taken its final round and ended
		n := len(c.all())
		time.Sleep(10 * interval) // the fake clock: ten ticks that must not come
		if len(c.all()) != n {
			t.Error("still sampling after cancel")
		}
		sum := r.Stop()
		if sum.Samples != n || sum.Family != "sglang" || sum.Waiting.Mean != 5 {
			t.Errorf("summary %+v (samples seen %d)", sum, n)
		}
		// The first round, 20 snapshots and the final round, at no cost
		// in fake time.
		if n != 22 {
			t.Errorf("%d samples, want 22", n)
		}
	})
}

func TestUnreachableAndBadSources(t *testing.T) {
	t.Parallel()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusUnauthorized)
	}))
	defer bad.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	r := Start(context.Background(), Config{Scrapes: []ScrapeConfig{{URL: bad.URL}, {URL: deadURL}, {URL: "::not a url"}},
		Interval: time.Hour}, nil)
	sum := r.Stop()
	if sum.Samples != 2 || sum.ScrapeErrors != 6 || sum.Family != "unknown" {
		t.Fatalf("%+v", sum)
	}
	joined := strings.Join(sum.Errors, "\n")
	for _, want := range []string{"HTTP 401 Unauthorized", "connection refused", "scrape[2] (invalid URL): invalid URL"} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors lack %q:\n%s", want, joined)
		}
	}
	if sum.Running != nil || sum.QueueDelay != nil || sum.GPUUtilization != nil {
		t.Errorf("data from nowhere: %+v", sum)
	}
}

func TestSlowSinkSkipsWholeTicks(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, _ := fileHandler(t, "tgi.prom")
		srv := newPipeServer(t, h)
		const interval = 40 * time.Millisecond
		var c collector
		r := Start(context.Background(), Config{Scrapes: []ScrapeConfig{{URL: "http://tgi/metrics"}}, Interval: interval, Dial: srv.dial},
			func(s Sample) {
				c.sink(s)
				time.Sleep(100 * time.Millisecond) // 2.5 intervals
			})
		time.Sleep(450 * time.Millisecond) // the fake clock
		sum := r.Stop()
		samples := c.all()
		// A round every 100 ms (its sink's time), the next started at once:
		// 0, 100, …, 400 ms, and the final one after the round the stop
		// came in (no tick taken after the stop).
		if len(samples) != 6 {
			t.Fatalf("%d samples, want 6", len(samples))
		}
		for i, s := range samples {
			if want := time.Duration(i) * 100 * time.Millisecond; s.Elapsed != want {
				t.Errorf("sample %d at %v, want %v", i, s.Elapsed, want)
			}
		}
		// 2.5 intervals per round: 1, 2, 1, 2, 1 ticks wholly missed.
		if sum.MissedIntervals != 7 {
			t.Errorf("%d missed intervals, want 7", sum.MissedIntervals)
		}
	})
}

// TestQueueDelayUnavailableReasons checks that a Run says why there is no
// queue-delay histogram to judge, in the Snapshot, Delta and Summary.
func TestQueueDelayUnavailableReasons(t *testing.T) {
	t.Parallel()
	llama, _ := serveFile(t, "llamacpp.prom")
	triton, _ := serveFile(t, "triton.prom")
	vllm, _ := serveFile(t, "vllm.prom")
	dcgm, _ := serveFile(t, "dcgm.prom")
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, c := range []struct {
		name    string
		urls    []string
		want    string
		buckets bool
	}{
		{"llama.cpp", []string{llama.URL}, NoQueueLlamaCPP, false},
		{"triton", []string{triton.URL}, NoQueueMeanOnly, false},
		{"dcgm only", []string{dcgm.URL}, NoQueueNotExposed, false},
		{"unreachable", []string{down.URL}, NoQueueNoScrape, false},
		{"none", nil, NoQueueNoEndpoint, false},
		{"vllm", []string{vllm.URL}, "", true},
		{"llama.cpp beside vllm", []string{llama.URL, vllm.URL}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sc []ScrapeConfig
			for _, u := range c.urls {
				sc = append(sc, ScrapeConfig{URL: u})
			}
			r := Start(context.Background(), Config{Scrapes: sc, Interval: time.Hour}, nil)
			a := r.Snapshot()
			b := r.Snapshot()
			sum := r.Stop()
			d := Delta(a, b)
			if b.QueueDelayUnavailable != c.want || d.Missing != c.want || sum.QueueDelayUnavailable != c.want {
				t.Errorf("reasons: snapshot %q delta %q summary %q, want %q", b.QueueDelayUnavailable, d.Missing,
					sum.QueueDelayUnavailable, c.want)
			}
			if got := !d.MeanOnly(); got != c.buckets {
				t.Errorf("delta has buckets %v, want %v", got, c.buckets)
			}
		})
	}
}

// A server that answers /metrics late (llama.cpp answers from its busy
// inference loop) keeps the sampling cadence: its answers count as late
// scrapes, not failures, and their counters still count.
func TestLateScrapesCountApartFromFailures(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		body, err := os.ReadFile("testdata/llamacpp.prom")
		if err != nil {
			t.Fatal(err)
		}
		srv := newPipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(250 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			w.Write(body)
		}))
		const interval = 100 * time.Millisecond
		var c collector
		r := Start(context.Background(), Config{Scrapes: []ScrapeConfig{{URL: "http://llama/metrics"}}, Interval: interval, Dial: srv.dial}, c.sink)
		time.Sleep(1250 * time.Millisecond) // the fake clock: rounds at 0, 100, …, 1200 ms
		sum := r.Stop()
		samples := c.all()
		if len(samples) != 14 {
			t.Errorf("%d samples in 1.25 s at 100 ms, want 14: the slow source stalled the cadence", len(samples))
		}
		// Scrapes start at 0, 300, 600, 900 and 1200 ms and answer 250 ms
		// later; the rounds at 300, 600, 900 and 1200 take the answers.
		if sum.LateScrapes != 4 || sum.Sources[0].Late != 4 {
			t.Errorf("late scrapes %d (source %d), want 4", sum.LateScrapes, sum.Sources[0].Late)
		}
		if sum.ScrapeErrors != 1 { // the one still running when sampling stopped
			t.Errorf("%d scrape errors, want 1: late answers were counted as failures: %v", sum.ScrapeErrors, sum.Errors)
		}
		if sum.PromptTokens == nil || sum.Family != string(FamilyLlamaCPP) {
			t.Errorf("late answers' series did not count: family %q prompt tokens %v", sum.Family, sum.PromptTokens)
		}
	})
}

// Ollama has no /metrics (404; its root says "Ollama is running"): asked
// once, the summary says "no server metrics (Ollama)", no error is
// counted, and the sink gets no sample (telemetry.jsonl no empty line a
// second).
func TestOllamaHasNoMetrics(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var metricsAsks atomic.Int32
		mux := http.NewServeMux()
		mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("Ollama is running")) })
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			metricsAsks.Add(1)
			http.NotFound(w, r)
		})
		srv := newPipeServer(t, mux)
		var sunk atomic.Int32
		r := Start(context.Background(), Config{Scrapes: []ScrapeConfig{{URL: "http://ollama/metrics"}}, Interval: 20 * time.Millisecond,
			Dial: srv.dial}, func(Sample) { sunk.Add(1) })
		time.Sleep(200 * time.Millisecond) // the fake clock: ten rounds
		sum := r.Stop()
		if sum.ScrapeErrors != 0 || len(sum.Errors) != 0 || sum.NoMetrics != "no server metrics (Ollama)" {
			t.Errorf("errors %d %q, no metrics %q", sum.ScrapeErrors, sum.Errors, sum.NoMetrics)
		}
		if n := metricsAsks.Load(); n != 1 {
			t.Errorf("/metrics asked %d times", n)
		}
		src := sum.Sources[0]
		if src.Scrapes != 1 || src.Errors != 0 || !strings.Contains(src.Absent, "Ollama") {
			t.Errorf("source %+v", src)
		}
		if n := sunk.Load(); n != 0 || sum.Samples != 0 {
			t.Errorf("%d samples to the sink, %d counted: want none", n, sum.Samples)
		}
		if sum.QueueDelayUnavailable != NoQueueNoMetrics {
			t.Errorf("queue unavailable %q", sum.QueueDelayUnavailable)
		}
	})
}
