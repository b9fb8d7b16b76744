package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config says what a Run samples.
type Config struct {
	// Scrapes are the endpoints read every interval: the server's /metrics
	// and, optionally, a dcgm-exporter.
	Scrapes []ScrapeConfig
	// GPU is read every interval too; nil means no local GPU sampling. The
	// Run never closes it.
	GPU GPUSampler
	// Interval between samples; 0 means 1 s.
	Interval time.Duration
	// ServerModel is the model the run targets, for servers that export
	// several models' series of which only one counts the run's requests
	// once: Triton with an ensemble, whose composing models count each
	// request again (see ParseOptions). Empty: the only model loaded.
	ServerModel string

	// Dial, if set, opens the scrapes' connections instead of TCP: tests
	// serve /metrics over in-memory pipes (internal/pipenet), so that
	// sampling runs in a synctest bubble.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DefaultInterval is Config.Interval's default.
const DefaultInterval = time.Second

// Sample is one round of sampling. Write samples to DIR/telemetry.jsonl as
// they arrive: MarshalJSON gives one line of stable snake_case keys.
type Sample struct {
	// At is when the round started; Elapsed is At minus the Run's start.
	At      time.Time
	Elapsed time.Duration
	// Server merges the scrapes that answered this round (nil: none did).
	Server *ServerSample
	// GPUs are the local GPU sampler's readings (nil without one).
	GPUs []GPUStat
	// Errors are this round's failures, "source: what", e.g.
	// "http://h:8000/metrics: timed out after 900ms". They never carry
	// headers or the URL's user info or query.
	Errors []string
	// Late are sources whose scrape had not answered when the round
	// closed; it runs on and counts when it answers (a late scrape) or
	// fails at its timeout.
	Late []string
}

// Snapshot is what a Run has counted since each source's first successful
// scrape: cumulative histograms and token counters, corrected for counter
// resets (a server restart), summed over sources. Take one at a stage's
// start and end and subtract (Delta, Histogram.Sub) for the stage.
type Snapshot struct {
	At      time.Time `json:"at"`
	Samples int       `json:"samples"`
	// QueueDelay, TTFT and E2E are nil until a source exposes them.
	QueueDelay *Histogram `json:"queue_delay,omitempty"`
	TTFT       *Histogram `json:"ttft,omitempty"`
	E2E        *Histogram `json:"e2e,omitempty"`
	// PromptTokens and GenerationTokens are nil until a source exposes them.
	PromptTokens     *float64 `json:"prompt_tokens,omitempty"`
	GenerationTokens *float64 `json:"generation_tokens,omitempty"`
	// QueueDelayUnavailable says why QueueDelay is nil or mean-only (one
	// of the NoQueue… reasons), so a queue_delay objective is NO_DATA with
	// that reason; empty when QueueDelay has buckets.
	QueueDelayUnavailable string `json:"queue_delay_unavailable,omitempty"`
	// Energy is the GPUs' energy counted so far (see EnergyDelta).
	Energy EnergyReading `json:"energy"`
}

// Run samples the serving side in the background until Stop.
type Run struct {
	interval   time.Duration
	gpuTimeout time.Duration
	sink       func(Sample)
	gpu        GPUSampler
	devices    []GPUInfo
	start      time.Time
	sources    []*source
	gpuBusy    atomic.Bool
	client     *http.Client // every source's

	stop     chan struct{}
	now      chan chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	sumOnce  sync.Once
	summary  Summary

	mu    sync.Mutex // guards st and the sources' counters
	st    stats
	first time.Time // first and last round
	last  time.Time
}

// source is one scrape endpoint and what has been counted from it.
type source struct {
	scraper
	// wait is how long a round waits for this source's answer. A scrape
	// may run on past it, up to scraper.timeout; its answer is then taken
	// in a later round as a late scrape (llama.cpp answers /metrics from
	// its inference loop: under load it answers late, not never), and the
	// rounds keep their cadence meanwhile.
	wait time.Duration
	// answer holds the outcome of a scrape that outlived its round; late
	// is set while one does. Both are touched by the round loop only.
	answer chan outcome
	late   bool
	// absent says why the source is no longer asked: it answered 404 or
	// 501 before it ever answered with metrics (Ollama has no /metrics).
	// Set by the round loop, read under Run.mu for the Summary.
	absent string

	// Guarded by Run.mu.
	family          Family
	queueMissing    string // the last answer's QueueDelayUnavailable
	model, modelWhy string // the last answer's ServerModel and ServerModelNote
	queueNote       string // the last answer's QueueDelayNote
	noGPUField      bool   // a dcgm-exporter answer had no GPU field tailgate reads
	answered        bool   // some scrape succeeded
	scrapes, errors int
	lates           int // answered, but after their round closed
	queue, ttft     histAcc
	e2e             histAcc
	prompt, gen     counterAcc
	capC            map[capKey]*counterAcc
	capH            map[capKey]*histAcc
}

// Start begins sampling: one round at once, then one every Interval on a
// fixed schedule (after a round that overruns its tick the next starts at
// once, and ticks wholly missed are skipped and counted). Each
// round scrapes every source and reads the GPU sampler concurrently, each
// bounded by its timeout (below the interval), then calls sink with the
// Sample. sink is called from one goroutine, never concurrently; a nil sink
// is fine. Errors are counted and reported in the Sample, never fatal.
// Cancelling ctx ends sampling like Stop, which must still be called for
// the Summary.
func Start(ctx context.Context, cfg Config, sink func(Sample)) *Run {
	interval := cfg.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	def := interval * 9 / 10
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2
	if cfg.Dial != nil {
		tr.DialContext = cfg.Dial
	}
	client := &http.Client{Transport: tr}
	r := &Run{
		interval:   interval,
		gpuTimeout: def,
		client:     client,
		sink:       sink,
		gpu:        cfg.GPU,
		start:      time.Now(),
		stop:       make(chan struct{}),
		now:        make(chan chan struct{}),
		done:       make(chan struct{}),
	}
	if r.gpu != nil {
		r.devices = r.gpu.Devices()
	}
	for i, sc := range cfg.Scrapes {
		timeout := sc.Timeout
		if timeout <= 0 || timeout >= interval {
			timeout = def
		}
		r.sources = append(r.sources, &source{scraper: scraper{cfg: sc, name: sourceName(sc.URL, i),
			timeout: max(timeout, lateTimeout(interval)), client: client, opts: ParseOptions{ServerModel: cfg.ServerModel}},
			wait: timeout, answer: make(chan outcome, 1)})
	}
	r.st.init()
	go r.loop(ctx)
	return r
}

func (r *Run) loop(ctx context.Context) {
	defer close(r.done)
	// Sampling is over: no kept-alive connection is used again. (A late
	// scrape still running keeps its own until it ends.)
	defer r.closeIdle()
	final := func() { r.roundFinal(context.WithoutCancel(ctx), true) }
	if ctx.Err() != nil {
		final()
		return
	}
	r.round(ctx)
	next := r.start.Add(r.interval)
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			final()
			return
		case <-r.stop:
			final()
			return
		case reply := <-r.now:
			r.round(ctx)
			close(reply)
		case <-timer.C:
			// A tick due while Stop (or the end of ctx) waited for a slow
			// round is not taken: select picks among ready cases at random,
			// and Stop means one final round, not more.
			if r.stopping(ctx) {
				final()
				return
			}
			r.round(ctx)
			// The next tick on the grid; if the round overran it, run at
			// once, and skip only ticks that are wholly past.
			next = next.Add(r.interval)
			if skip := time.Since(next) / r.interval; skip > 0 {
				next = next.Add(skip * r.interval)
				r.mu.Lock()
				r.st.missed += int(skip)
				r.mu.Unlock()
			}
			timer.Reset(time.Until(next))
		}
	}
}

// stopping reports whether Stop was called or ctx ended.
func (r *Run) stopping(ctx context.Context) bool {
	select {
	case <-r.stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// closeIdle closes the scrapes' idle kept-alive connections.
func (r *Run) closeIdle() { r.client.CloseIdleConnections() }

// Snapshot takes a sampling round now (so a stage boundary is not up to an
// interval stale; the round's Sample goes to the sink as usual) and returns
// the counts after it. It blocks for at most about one scrape timeout after
// any round in progress. After Stop it returns the final counts.
func (r *Run) Snapshot() Snapshot {
	reply := make(chan struct{})
	select {
	case r.now <- reply:
		<-reply
	case <-r.done:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshotLocked()
}

func (r *Run) snapshotLocked() Snapshot {
	s := Snapshot{At: r.last, Samples: r.st.samples, Energy: r.st.energy.reading()}
	for _, src := range r.sources {
		s.QueueDelay = addHist(s.QueueDelay, src.queue.total)
		s.TTFT = addHist(s.TTFT, src.ttft.total)
		s.E2E = addHist(s.E2E, src.e2e.total)
		s.PromptTokens = addCounter(s.PromptTokens, &src.prompt)
		s.GenerationTokens = addCounter(s.GenerationTokens, &src.gen)
	}
	s.QueueDelayUnavailable = r.queueMissingLocked(s.QueueDelay)
	return s
}

// queueMissingLocked says why q (the summed queue delay) cannot be judged,
// "" when it has buckets.
func (r *Run) queueMissingLocked(q *Histogram) string {
	if q != nil && !q.MeanOnly() {
		return ""
	}
	var why []string
	answered := false
	for _, src := range r.sources {
		answered = answered || src.answered
		if src.absent != "" && !slices.Contains(why, NoQueueNoMetrics) {
			why = append(why, NoQueueNoMetrics)
		}
		if src.queueMissing != "" && !slices.Contains(why, src.queueMissing) {
			why = append(why, src.queueMissing)
		}
	}
	switch {
	case len(why) > 0:
		return strings.Join(why, "; ")
	case len(r.sources) == 0:
		return NoQueueNoEndpoint
	case !answered:
		return NoQueueNoScrape
	}
	return NoQueueNotExposed
}

// Stop ends sampling after one final round and returns the Summary. It may
// be called more than once; later calls return the same Summary.
func (r *Run) Stop() Summary {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
	r.sumOnce.Do(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.summary = r.summaryLocked()
	})
	return r.summary
}

// observe counts one answer's cumulative series. Called with Run.mu held.
func (src *source) observe(s *ServerSample) {
	src.family, src.answered = s.Family, true
	src.model, src.modelWhy = s.ServerModel, s.ServerModelNote
	src.queueNote = s.QueueDelayNote
	src.noGPUField = s.Family == FamilyDCGM && len(s.GPUs) == 0
	if s.QueueDelay != nil || s.QueueDelayUnavailable != "" {
		src.queueMissing = s.QueueDelayUnavailable
	}
	src.queue.observe(s.series.queue)
	src.ttft.observe(s.series.ttft)
	src.e2e.observe(s.series.e2e)
	src.prompt.observe(s.series.prompt)
	src.gen.observe(s.series.gen)
	if src.capC == nil {
		src.capC, src.capH = map[capKey]*counterAcc{}, map[capKey]*histAcc{}
		for _, c := range capCounters {
			src.capC[c.key] = &counterAcc{}
		}
		for _, c := range capHists {
			src.capH[c.key] = &histAcc{}
		}
	}
	for k, a := range src.capC {
		a.observe(s.series.counters[k])
	}
	for k, a := range src.capH {
		a.observe(s.series.hists[k])
	}
}

// lateTimeout is how long one scrape may take in all, answering late.
func lateTimeout(interval time.Duration) time.Duration { return max(10*time.Second, 5*interval) }

// roundBox takes a round's answers while the round is open; an answer
// after it closed goes to its source's answer channel instead.
type roundBox struct {
	mu   sync.Mutex
	open bool
	ch   chan outcome
}

func (b *roundBox) deliver(src *source, o outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		b.ch <- o // buffered for every source
		return
	}
	src.answer <- o
}

// outcome is one source's answer in a round.
type outcome struct {
	i      int
	sample *ServerSample
	err    error
}

// round scrapes every source and the GPU sampler concurrently, waits at
// most until the longest timeout (plus a little) has passed, updates the
// counts and calls the sink.
func (r *Run) round(ctx context.Context) { r.roundFinal(ctx, false) }

// roundFinal is one round; in the final one a scrape still unanswered
// fails.
func (r *Run) roundFinal(ctx context.Context, final bool) {
	rd := r.startRound(ctx)
	rd.collect(r.gpuTimeout)
	smp, ok := r.record(rd, final)
	if ok && r.sink != nil {
		r.sink(smp)
	}
}

// round is one sampling round in flight: a scrape per source that has
// metrics and is not still busy with an earlier round's, and one GPU
// sample.
type round struct {
	at          time.Time
	results     []*outcome // this round's answers, by source
	lateAnswers []*outcome // earlier rounds' answers that came since
	started     []bool
	box         *roundBox
	pending     int
	wait        time.Duration // the longest a started scrape may take
	gpuCh       chan gpuOutcome
	gpuStats    []GPUStat
	gpuErr      error
}

type gpuOutcome struct {
	stats []GPUStat
	err   error
}

// startRound starts the round's scrapes and GPU sample, each on its own
// goroutine.
func (r *Run) startRound(ctx context.Context) *round {
	n := len(r.sources)
	rd := &round{at: time.Now(), results: make([]*outcome, n), lateAnswers: make([]*outcome, n), started: make([]bool, n),
		box: &roundBox{open: true, ch: make(chan outcome, n)}, wait: r.gpuTimeout}
	for i, src := range r.sources {
		if src.absent != "" {
			continue
		}
		rd.wait = max(rd.wait, src.wait)
		if src.late {
			// An earlier round's scrape outlived it: take its answer if it
			// came, else let it run on (not failed until its timeout).
			select {
			case o := <-src.answer:
				src.late = false
				rd.lateAnswers[i] = &o
			default:
				continue
			}
		}
		rd.started[i] = true
		rd.pending++
		go func() {
			s, err := src.scrape(ctx)
			rd.box.deliver(src, outcome{i: i, sample: s, err: err})
		}()
	}
	if r.gpu != nil {
		if r.gpuBusy.CompareAndSwap(false, true) {
			rd.gpuCh = make(chan gpuOutcome, 1)
			rd.pending++
			go func() {
				st, err := r.gpu.Sample()
				r.gpuBusy.Store(false)
				rd.gpuCh <- gpuOutcome{st, err}
			}()
		} else {
			rd.gpuErr = errors.New("previous sample still running")
		}
	}
	return rd
}

// collect waits for the round's answers, up to the longest wait and a
// margin; a scrape that has not answered by then is late (its answer goes
// to its source, for a later round), and the round's box closes.
func (rd *round) collect(gpuTimeout time.Duration) {
	deadline := time.NewTimer(rd.wait + rd.wait/20 + 5*time.Millisecond)
	defer deadline.Stop()
	for rd.pending > 0 {
		select {
		case o := <-rd.box.ch:
			rd.results[o.i] = &o
			rd.pending--
		case g := <-rd.gpuCh:
			rd.gpuStats, rd.gpuErr = g.stats, g.err
			rd.gpuCh = nil
			rd.pending--
		case <-deadline.C:
			rd.pending = 0
		}
	}
	rd.box.mu.Lock()
	rd.box.open = false
	for len(rd.box.ch) > 0 { // answered just before the close
		o := <-rd.box.ch
		rd.results[o.i] = &o
	}
	rd.box.mu.Unlock()
	if rd.gpuCh != nil {
		rd.gpuErr = fmt.Errorf("no answer within %v", gpuTimeout)
	}
}

// record counts the round's answers into each source and the run's
// statistics and makes its sample; false when nothing at all was read
// (every source has no metrics), so no empty sample is written. In the
// final round a scrape still out is a failure, not late.
func (r *Run) record(rd *round, final bool) (Sample, bool) {
	smp := Sample{At: rd.at, Elapsed: rd.at.Sub(r.start), GPUs: rd.gpuStats}
	var parts []*ServerSample
	var names []string
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, src := range r.sources {
		if lo := rd.lateAnswers[i]; lo != nil {
			// Counters and histograms are cumulative: a late answer's are
			// as good as a timely one's. Its gauges are stale: not merged
			// into this round's sample.
			src.scrapes++
			if lo.err != nil {
				src.errors++
				r.st.errors++
				smp.Errors = append(smp.Errors, src.name+": "+lo.err.Error())
			} else if s := lo.sample; s != nil {
				src.lates++
				r.st.lateScrapes++
				src.observe(s)
			}
		}
		o := rd.results[i]
		if o == nil && !rd.started[i] && src.absent != "" {
			continue // not asked: it has no metrics
		}
		if o == nil {
			if rd.started[i] {
				src.late = true
			}
			if final {
				src.scrapes++
				src.errors++
				r.st.errors++
				smp.Errors = append(smp.Errors, fmt.Sprintf("%s: no answer by the end of sampling", src.name))
			} else {
				smp.Late = append(smp.Late, fmt.Sprintf("%s: no answer within %v yet", src.name, src.wait))
			}
			continue
		}
		src.scrapes++
		var none *noEndpointError
		if errors.As(o.err, &none) && !src.answered {
			// No metrics there (Ollama): said once in the summary, not
			// an error, and not asked again.
			src.absent = none.Error()
			continue
		}
		if o.err != nil {
			// A scrape that did not parse whole is a failed scrape: half
			// a histogram would look like a counter reset.
			src.errors++
			r.st.errors++
			smp.Errors = append(smp.Errors, src.name+": "+o.err.Error())
			continue
		}
		if s := o.sample; s != nil {
			for j := range s.GPUs {
				s.GPUs[j].Source = src.name
			}
			src.observe(s)
			parts = append(parts, s)
			names = append(names, src.name)
		}
	}
	if r.gpu != nil {
		r.st.gpuSamples++
		if rd.gpuErr != nil {
			r.st.gpuErrors++
			r.st.errors++
			smp.Errors = append(smp.Errors, "nvml: "+strings.TrimPrefix(rd.gpuErr.Error(), "telemetry: nvml: "))
		}
	}
	smp.Server = mergeServer(parts, names)
	if smp.Server == nil && len(smp.GPUs) == 0 && len(smp.Errors) == 0 && len(smp.Late) == 0 && r.gpu == nil {
		// Nothing was read: every source has no metrics (Ollama). No
		// sample, so telemetry.jsonl gets no empty line a second.
		return smp, false
	}
	r.st.add(&smp, r.gpu != nil, r.devices)
	if r.first.IsZero() {
		r.first = rd.at
	}
	r.last = rd.at
	return smp, true
}

// mergeServer combines the sources that answered a round (see
// ServerSample for the rules).
func mergeServer(parts []*ServerSample, names []string) *ServerSample {
	if len(parts) == 0 {
		return nil
	}
	if len(parts) == 1 {
		s := *parts[0]
		s.Sources = names
		return &s
	}
	out := &ServerSample{Sources: names}
	fams := make([]Family, 0, len(parts))
	var kvSum float64
	seen := map[string]int{} // GPU UUID/MIG → index in out.GPUs
	for _, p := range parts {
		fams = append(fams, p.Family)
		out.Running = addPtr(out.Running, p.Running)
		out.Waiting = addPtr(out.Waiting, p.Waiting)
		out.KVBlocksUsed = addPtr(out.KVBlocksUsed, p.KVBlocksUsed)
		out.KVBlocksMax = addPtr(out.KVBlocksMax, p.KVBlocksMax)
		if p.QueueDelayNote != "" && !strings.Contains(out.QueueDelayNote, p.QueueDelayNote) {
			out.QueueDelayNote = strings.TrimPrefix(out.QueueDelayNote+"; "+p.QueueDelayNote, "; ")
		}
		out.PromptTokens = addPtr(out.PromptTokens, p.PromptTokens)
		out.GenerationTokens = addPtr(out.GenerationTokens, p.GenerationTokens)
		if p.KVUsage != nil {
			n := max(p.kvSeries, 1)
			kvSum += *p.KVUsage * float64(n)
			out.kvSeries += n
		}
		out.QueueDelay = addHist(out.QueueDelay, p.QueueDelay)
		out.TTFT = addHist(out.TTFT, p.TTFT)
		out.E2E = addHist(out.E2E, p.E2E)
		for _, g := range p.GPUs {
			if g.UUID != "" {
				key := g.UUID + "/" + g.MIG
				if j, ok := seen[key]; ok {
					fillGPU(&out.GPUs[j], g)
					continue
				}
				seen[key] = len(out.GPUs)
			}
			out.GPUs = append(out.GPUs, g)
		}
	}
	if out.kvSeries > 0 {
		out.KVUsage = new(kvSum / float64(out.kvSeries))
	}
	out.Family = mergeFamilies(fams)
	return out
}

// fillGPU copies into dst the readings it lacks from src, another source's
// view of the same device.
func fillGPU(dst *EndpointGPU, src EndpointGPU) {
	for _, f := range []struct{ d, s **float64 }{
		{&dst.Utilization, &src.Utilization}, {&dst.EngineActive, &src.EngineActive},
		{&dst.MemoryUsedBytes, &src.MemoryUsedBytes}, {&dst.MemoryTotalBytes, &src.MemoryTotalBytes},
		{&dst.PowerWatts, &src.PowerWatts}, {&dst.TemperatureC, &src.TemperatureC},
	} {
		if *f.d == nil {
			*f.d = *f.s
		}
	}
	dst.Model = cmp.Or(dst.Model, src.Model)
	dst.DriverVersion = cmp.Or(dst.DriverVersion, src.DriverVersion)
}

func addPtr(a, b *float64) *float64 {
	switch {
	case b == nil:
		return a
	case a == nil:
		return new(*b)
	}
	return new(*a + *b)
}

func addHist(a, b *Histogram) *Histogram {
	switch {
	case b == nil:
		return a
	case a == nil:
		return new(b.Clone())
	}
	return new(a.Plus(*b))
}

func addCounter(a *float64, c *counterAcc) *float64 {
	if !c.seen {
		return a
	}
	return addPtr(a, &c.total)
}

// histAcc turns one source's cumulative histogram readings into the
// reset-corrected increase since its first reading, as Prometheus's
// increase() does: per series (label set), each series' reset handled on
// its own, then summed. A series that disappears adds nothing further
// (its last reading is kept: should it come back, it continues from
// there, or counts as reset if it fell). A series first seen after the
// source's first good scrape started during the run (a lazily created
// label set, a model loaded mid-run, an engine that joined): it counts
// from zero, so its first reading counts in full.
type histAcc struct {
	last   map[string]Histogram // nil until the source's first good scrape
	total  *Histogram
	resets int
}

func (a *histAcc) observe(cur map[string]Histogram) {
	first := a.last == nil
	if first {
		a.last = map[string]Histogram{}
	}
	for _, key := range sortedKeys(cur) {
		h := cur[key]
		prev, seen := a.last[key]
		var inc Histogram
		switch {
		case first:
			inc = h.Zero() // baseline: the server's history, not counted
		case !seen:
			inc = h.Clone()
		default:
			var reset bool
			if inc, reset = h.Sub(prev); reset {
				a.resets++
			}
		}
		a.total = addHist(a.total, &inc)
		a.last[key] = h.Clone()
	}
}

// counterAcc is histAcc for a counter. A counter has been reset only
// when a series' new reading is below its previous one (compared series
// by series, never as a sum: a float sum may round down when the series
// come in another order).
type counterAcc struct {
	last   map[string]float64
	seen   bool // some series was read
	total  float64
	resets int
}

func (a *counterAcc) observe(cur map[string]float64) {
	first := a.last == nil
	if first {
		a.last = map[string]float64{}
	}
	for _, key := range sortedKeys(cur) {
		v := cur[key]
		prev, seen := a.last[key]
		switch {
		case first:
		case !seen:
			a.total += v
		case v < prev:
			a.total += v
			a.resets++
		default:
			a.total += v - prev
		}
		a.seen = true
		a.last[key] = v
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
