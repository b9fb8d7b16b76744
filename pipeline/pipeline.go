package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
	"github.com/tailgate-llm/tailgate/theater"
)

// Spec is one load run: what to send, how, and where results go.
type Spec struct {
	Client  loadgen.Client
	Source  loadgen.Source
	Options loadgen.Options
	Meta    schema.SummaryMeta
	// Streaming says the client asked for streamed answers, so an answer
	// that came as one body means the server ignored "stream".
	Streaming bool
	// Goodput, if set, judges each OK record against the SLO's per-request
	// goodput constraints (summary.json's goodput_per_s); with SLO set and
	// Goodput nil, the SLO's constraints are used.
	Goodput measure.GoodputJudge
	// SLO, if set, judges the run: the pipeline feeds every record to the
	// judge and writes the report into summary.json (slo) and verdict.json
	// once, so no caller judges again.
	SLO *Judging
	// Validity is the bounds the run is held to (nil: slo.DefaultValidity).
	// The pipeline judges every stage by them, with the self-check, the
	// interruption and the results' fate, into summary.json's validity
	// and the report's problems.
	Validity *slo.Validity
	// Telemetry, if set, samples the server's metrics and GPUs beside the
	// run.
	Telemetry *telemetry.Config
	// Out receives requests.jsonl and telemetry.jsonl as results arrive,
	// latency.hlog each second, and queue_delay.json and summary.json at
	// the end, also when the run is stopped. Empty: nothing is written.
	Out results.Dir
	// Progress, if set, is told how the run goes once a second.
	Progress Progress
	// Theater sets the metric-theater rule (the zero value: its defaults),
	// judged whenever Telemetry is set; the result is summary.json's
	// capacity section.
	Theater theater.Options
	// Changes are change-record ids recorded in summary.json (changes).
	Changes []string
	// PlannedLengths is the mix's length plan, recorded in summary.json
	// (planned_lengths); nil without a mix.
	PlannedLengths *prompts.LengthPlan
	// GPUHourCostUSD, if set, prices each stage's GPU time: the cost per
	// million output tokens beside the energy (needs telemetry that reads
	// the GPUs' energy or power, which also counts them).
	GPUHourCostUSD float64
	// KeepGoing keeps sending after a sink fails. By default the first
	// failure stops the run: its results on disk would be incomplete.
	KeepGoing bool
	// Records is the form requests.jsonl is kept in (default full; none
	// writes no records) and RecordsCompression its compression (the file
	// is then requests.jsonl.gz or .zst).
	Records            results.RecordsForm
	RecordsCompression results.Compression
	// Identity names what the run sends beyond Meta (e.g. "mix": its
	// hash), written to histograms.json: merge refuses shards whose
	// identities differ.
	Identity map[string]string
	// Notices, if set, are the once-only notices the client gave during
	// the run (protocol.Target.Warn: a server that closes every
	// connection), added to summary.json's warnings.
	Notices *Notices
}

// Notices collects once-only notices from any goroutine, for summary.json.
type Notices struct {
	mu   sync.Mutex
	list []string
}

// Add records msg.
func (n *Notices) Add(msg string) {
	n.mu.Lock()
	n.list = append(n.list, msg)
	n.mu.Unlock()
}

// List returns the notices so far.
func (n *Notices) List() []string {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.list)
}

// Judging is what the pipeline judges a run against.
type Judging struct {
	Spec *slo.Spec
	// Stage, if set, is the plan stage this run is: only the objectives it
	// applies are judged. Waivers are the plan's, beside the spec's.
	Stage   *slo.Stage
	Waivers []slo.Waiver
	// Now is the instant waivers are judged at (zero: when the run ends).
	Now time.Time
	// Demand, if set, is the load the run's one stage offers by itself (a
	// sweep's open-loop level): floors beyond its reach are N/A there.
	Demand *slo.Demand
}

// Result is what a run produced. Summary's figures are complete even when
// files could not be written: they come from memory.
type Result struct {
	Summary *results.Summary
	Info    loadgen.Info
	Metrics *measure.Metrics
	// QueueDelay is the server's queue-delay histogram gained in each stage
	// (by stage name, warm-up left out); empty without telemetry or when
	// the server exposes none.
	QueueDelay map[string]*telemetry.Histogram
	// SinkErrors lists every sink that failed, in order.
	SinkErrors []SinkError
	// Stopped is why the pipeline stopped the run early (a sink failed);
	// nil otherwise. A user's Ctrl-C is Info.Interrupted.
	Stopped error
	// Report is the run's judgement: every stage's validity problems and,
	// with Spec.SLO, the verdicts (then also Summary.SLO). Read it, with
	// Summary.Validity, through results.Exit.
	Report *slo.Report
}

// WriteErr is the first failure to write results, nil if none.
func (r *Result) WriteErr() error {
	for _, e := range r.SinkErrors {
		var we *results.WriteError
		if errors.As(e.Err, &we) {
			return e
		}
	}
	return nil
}

// Run runs the load and hands every record, on one goroutine, to the
// built-in sinks (metrics; requests.jsonl and latency.hlog under Out) and to
// sinks. A failing sink is reported in Result.SinkErrors without stopping
// the others; unless Spec.KeepGoing, it also stops sending. The error is
// for a run that could not start (bad options, results not creatable) or a
// prompt source that failed; then Result may be nil.
func Run(ctx context.Context, spec Spec, sinks ...Sink) (*Result, error) {
	runner, err := loadgen.NewRunner(spec.Client, spec.Source, spec.Options)
	if err != nil {
		return nil, err
	}
	metrics := measure.NewMetrics()
	metrics.Goodput = spec.Goodput
	if metrics.Goodput == nil && spec.SLO != nil {
		metrics.Goodput = spec.SLO.Spec.GoodputFunc()
	}
	judge := newJudge(spec)
	start := time.Now()
	own, rw, err := openFiles(spec, metrics, start)
	if err != nil {
		return nil, err
	}
	p := &pipe{metrics: metrics, streaming: spec.Streaming, judge: judge}
	for _, s := range append(own, sinks...) {
		p.sinks = append(p.sinks, newSinkState(s))
	}
	var tel *telemetryRun
	if spec.Telemetry != nil {
		p.work = &workTimeline{}
		p.theater = theater.New(spec.Theater)
		if tel, err = startTelemetry(ctx, *spec.Telemetry, spec.Out, spec.Options, p.theater); err != nil {
			p.closeSinks()
			return nil, err
		}
	}
	info, runErr, stopped := p.drain(ctx, runner, spec, tel, start)
	p.closeSinks()

	res := &Result{Info: info, Metrics: metrics, Stopped: stopped}
	res.Summary = summarize(metrics, info, spec.Meta, judge.Validity().MaxDistortion.Float())
	if rw != nil {
		// What was written, as it was written: check and merge hold the
		// file to it.
		d := rw.Digest()
		res.Summary.Records = &d
	}
	if tel != nil {
		p.addTelemetry(res, tel, spec.GPUHourCostUSD)
	}
	res.SinkErrors = p.errs
	res.Summary.Changes = spec.Changes
	res.Summary.PlannedLengths = spec.PlannedLengths
	res.Summary.Warnings = append(res.Summary.Warnings, p.warnings(res)...)
	res.Summary.Warnings = append(res.Summary.Warnings, spec.Notices.List()...)
	rejudge := func() {
		res.Report = judgeRun(judge, spec, res, runErr)
		res.Summary.Validity = results.NewValidity(judge.Validity(), res.Report.Problems)
		if spec.SLO != nil {
			res.Summary.SLO = res.Report
		}
	}
	rejudge()
	if spec.Out != "" {
		writeResults(spec, res, judge.Validity())
		if res.WriteErr() != nil && res.Summary.Validity.Valid {
			// What the summary could not say about itself: results that
			// did not reach the disk make the run invalid here too.
			rejudge()
		}
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return res, runErr
	}
	return res, nil
}

// openFiles creates spec.Out and the sinks that write the run's own
// files into it as records arrive (records, sessions, the interval log),
// and returns them with the records writer (nil without records). Without
// an Out there are none.
func openFiles(spec Spec, metrics *measure.Metrics, start time.Time) ([]Sink, *results.RecordWriter, error) {
	if spec.Out == "" {
		return nil, nil, nil
	}
	if err := spec.Out.Create(); err != nil {
		return nil, nil, err
	}
	var own []Sink
	var rw *results.RecordWriter
	if spec.Records != results.RecordsNone {
		form := spec.Records
		if form == "" {
			form = results.RecordsFull
		}
		name := results.RecordsFileName(spec.RecordsCompression)
		var err error
		if rw, err = results.CreateRecordWriter(spec.Out.Path(name), form, spec.RecordsCompression); err != nil {
			return nil, nil, err
		}
	}
	hw, err := results.CreateHlog(spec.Out.Path(results.HlogFile), start)
	if err != nil {
		if rw != nil {
			rw.Close()
		}
		return nil, nil, err
	}
	if rw != nil {
		own = append(own, &recordsSink{w: rw})
	}
	own = append(own, &sessionsSink{path: spec.Out.Path(results.SessionsFile)})
	own = append(own, &hlogSink{w: hw, m: metrics})
	return own, rw, nil
}

// drain runs the load and feeds every record to the metrics and sinks as
// it arrives, ticking the sinks, the telemetry check and the progress
// display once a second, until the runner has sent and received all. A
// sink or the telemetry failing stops the sending (unless KeepGoing); the
// error that stopped it is returned with the runner's.
func (p *pipe) drain(ctx context.Context, runner *loadgen.Runner, spec Spec, tel *telemetryRun, start time.Time) (loadgen.Info, error, error) {
	records := make(chan *loadgen.Record, 4096)
	type outcome struct {
		info loadgen.Info
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		info, err := runner.Run(ctx, records)
		done <- outcome{info, err}
	}()

	total := loadgen.TotalDuration(spec.Options.Stages)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastTick := start
	var stopped error
	stop := func(err error) {
		if stopped == nil && !spec.KeepGoing {
			stopped = fmt.Errorf("stopped sending: %w", err)
			runner.Stop(stopped)
		}
	}
loop:
	for {
		select {
		case rec, ok := <-records:
			if !ok {
				break loop
			}
			if err := p.take(rec, len(records)); err != nil {
				stop(err)
			}
		case now := <-tick.C:
			// A backlog that never empties is still written each second.
			if err := p.idle(); err != nil {
				stop(err)
			}
			if err := p.tick(lastTick, now); err != nil {
				stop(err)
			}
			if tel != nil && tel.err() != nil {
				stop(tel.err())
			}
			lastTick = now
			if spec.Progress != nil {
				ttft := p.metrics.All.Hist[measure.MetricTTFT]
				spec.Progress.Update(ProgressState{Elapsed: now.Sub(start), Total: total, Sent: runner.Sent(), Done: p.done, Failed: p.failed,
					TTFTP99: time.Duration(ttft.ValueAtQuantile(99)) * time.Microsecond, HasTTFT: ttft.TotalCount() > 0})
			}
		}
	}
	out := <-done
	if spec.Progress != nil {
		spec.Progress.Finish()
	}
	if err := p.tick(lastTick, time.Now()); err != nil {
		stop(err)
	}
	return out.info, out.err, stopped
}

// summarize is the run's summary from its metrics. The summary's
// self-check is at the default share; at the run's stated share (0: the
// default) its reasons and warnings replace the default's.
func summarize(metrics *measure.Metrics, info loadgen.Info, meta schema.SummaryMeta, share float64) *results.Summary {
	ls := metrics.Summary(info, meta)
	if share > 0 && share != selfcheck.DefaultMaxShift {
		def := ls.SelfCheck
		ls.SelfCheck = metrics.CheckSelf(info, share)
		ls.Warnings = append(slices.DeleteFunc(ls.Warnings, func(w string) bool {
			return slices.Contains(def.Reasons, w) || slices.Contains(def.Warnings, w)
		}), append(ls.SelfCheck.Reasons, ls.SelfCheck.Warnings...)...)
	}
	return &results.Summary{Summary: *ls}
}

// addTelemetry stops the telemetry and puts what it sampled beside the
// run's figures: the server's view, the queue delay, metric theatre and
// the energy of each stage beside the work of the same window.
func (p *pipe) addTelemetry(res *Result, tel *telemetryRun, gpuHourCostUSD float64) {
	ts, qd, serr := tel.stop()
	res.Summary.Telemetry = &ts
	if ts.Capacity != nil {
		res.Summary.Sessions.SetServerPrefixHitRate(ts.Capacity.PrefixCacheHitRate)
	}
	res.QueueDelay = qd
	res.Summary.MetricTheater = p.theater.Section()
	if w := res.Summary.MetricTheater.Warning(); w != "" {
		res.Summary.Warnings = append(res.Summary.Warnings, w)
	}
	if serr != nil {
		p.errs = append(p.errs, *serr)
	}
	// The runner's epoch is where the records' clock starts on the
	// sampler's.
	offset := res.Info.Started.Sub(tel.startedAt)
	for stage, win := range tel.energy() {
		if res.Summary.Energy == nil {
			res.Summary.Energy = map[string]*results.Energy{}
		}
		res.Summary.Energy[stage] = energyOf(win, p.work, offset, gpuHourCostUSD)
	}
	if res.Summary.Energy == nil {
		res.Summary.EnergyUnavailable = noEnergy(&ts)
	}
}

// writeResults writes the files made at the end (queue delay, the
// mergeable histograms, the verdict, summary.json last); each one that
// fails is a sink error of the result.
func writeResults(spec Spec, res *Result, bounds slo.Validity) {
	if q := results.QueueDelayByStage(res.QueueDelay); len(q) > 0 {
		if err := spec.Out.WriteQueueDelay(q); err != nil {
			res.SinkErrors = append(res.SinkErrors, SinkError{Sink: results.QueueDelayFile, Err: err})
		}
	}
	if err := writeHistograms(spec, res, bounds); err != nil {
		res.SinkErrors = append(res.SinkErrors, SinkError{Sink: results.HistogramsFile, Err: err})
	}
	if spec.SLO != nil {
		// A plan stage's verdict.json only: the plan's junit.xml is the
		// one CI reads, and a second per stage would count twice.
		write := exporters.WriteVerdicts
		if spec.SLO.Stage != nil {
			write = func(d results.Dir, r *slo.Report) error { return results.WriteJSON(d.Path(results.VerdictFile), r) }
		}
		if err := write(spec.Out, res.Report); err != nil {
			res.SinkErrors = append(res.SinkErrors, SinkError{Sink: results.VerdictFile, Err: err})
		}
	}
	if err := spec.Out.WriteSummary(res.Summary); err != nil {
		res.SinkErrors = append(res.SinkErrors, SinkError{Sink: results.SummaryFile, Err: err})
	}
}

// pipe is the record loop's state: one goroutine owns it.
type pipe struct {
	metrics      *measure.Metrics
	sinks        []*sinkState
	errs         []SinkError
	done, failed int64
	streaming    bool
	unstreamed   int64
	empty        int64             // ok answers without a content chunk
	emptyFailed  int64             // empty_answer failures
	theater      *theater.Detector // nil without telemetry
	work         *workTimeline     // nil without telemetry
	judge        *slo.Judge
	held         int // records taken since the sinks were last idle
}

type sinkState struct {
	Sink
	failed int // index into pipe.errs + 1; 0 while healthy
	// held counts the records an Idler was given since its last Idle:
	// those its failure loses.
	held  int64
	idler Idler // the Sink's, if it is one
}

func newSinkState(s Sink) *sinkState {
	i, _ := s.(Idler)
	return &sinkState{Sink: s, idler: i}
}

// take hands rec to the sinks and, when no record waits behind it
// (waiting is how many do), has them write out what they held: a burst
// is one write, and nothing gathered waits in a buffer for the next.
func (p *pipe) take(rec *loadgen.Record, waiting int) error {
	err := p.add(rec)
	if p.held++; waiting > 0 && p.held < maxHeld {
		return err
	}
	return cmpErr(err, p.idle())
}

// maxHeld bounds the records a burst holds before they are written, so
// a write stays small and a backlog that never empties is still written
// as it is taken.
const maxHeld = 64

// idle tells the Idler sinks to write out what they hold.
func (p *pipe) idle() error {
	p.held = 0
	var first error
	for _, s := range p.sinks {
		if s.idler == nil || s.failed > 0 || s.held == 0 {
			continue
		}
		lost := s.held
		s.held = 0
		if err := s.idler.Idle(); err != nil {
			p.errs = append(p.errs, SinkError{Sink: s.Name(), Err: err, Lost: lost})
			s.failed = len(p.errs)
			first = cmpErr(first, err)
		}
	}
	return first
}

func (p *pipe) add(rec *loadgen.Record) error {
	p.done++
	if !rec.OK() {
		p.failed++
	}
	if ttft, ok := rec.TTFT(); ok && p.theater != nil && rec.OK() && !rec.Warmup {
		p.theater.Request(rec.Class, rec.Intended, ttft)
	}
	if rec.OK() && rec.Unstreamed && !rec.Warmup {
		p.unstreamed++
	}
	if rec.OK() && !rec.Warmup && len(rec.Chunks) == 0 && !rec.Compact {
		p.empty++
	}
	if rec.ErrorKind == loadgen.ErrEmptyAnswer && !rec.Warmup {
		p.emptyFailed++
	}
	p.metrics.Add(rec)
	if p.work != nil {
		p.work.add(rec)
	}
	p.judge.Add(rec)
	var first error
	for _, s := range p.sinks {
		if s.failed > 0 {
			p.errs[s.failed-1].Lost++
			continue
		}
		s.held++
		err := s.Add(rec)
		if err != nil {
			// The record that failed is lost too, with those an Idler
			// held.
			p.errs = append(p.errs, SinkError{Sink: s.Name(), Err: err, Lost: s.held})
			s.failed = len(p.errs)
			if first == nil {
				first = err
			}
		}
		if s.idler == nil || err != nil {
			s.held = 0
		}
	}
	return first
}

func (p *pipe) tick(from, to time.Time) error {
	var first error
	for _, s := range p.sinks {
		t, ok := s.Sink.(Ticker)
		if !ok || s.failed > 0 {
			continue
		}
		if err := t.Tick(from, to); err != nil {
			p.errs = append(p.errs, SinkError{Sink: s.Name(), Err: err})
			s.failed = len(p.errs)
			first = cmpErr(first, err)
		}
	}
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (p *pipe) closeSinks() {
	for _, s := range p.sinks {
		if err := s.Close(); err != nil && s.failed == 0 {
			p.errs = append(p.errs, SinkError{Sink: s.Name(), Err: err})
			s.failed = len(p.errs)
		}
	}
}

// warnings are what the pipeline saw that the figures do not say.
func (p *pipe) warnings(res *Result) []string {
	var w []string
	for _, e := range res.SinkErrors {
		msg := fmt.Sprintf("results incomplete on disk: %v", e.Err)
		if e.Lost > 0 {
			msg += fmt.Sprintf(" (%d records not written from there on)", e.Lost)
		}
		w = append(w, msg)
	}
	if res.Stopped != nil {
		w = append(w, "the run was stopped early: "+res.Stopped.Error())
	}
	if p.streaming && p.unstreamed > 0 {
		w = append(w, fmt.Sprintf("the server ignored \"stream\": %d answers came as one body; they count for TTFT and E2E but give no ICL, ITL or TPOT", p.unstreamed))
	}
	if p.empty > 0 {
		w = append(w, fmt.Sprintf("%d answers were empty (the model ended at once, at its end-of-sequence token, as the server said, or empty answers were accepted): ok, but with no TTFT, ICL, ITL or TPOT sample", p.empty))
	}
	if p.emptyFailed > 0 {
		w = append(w, fmt.Sprintf("%d answers carried no output token and the server did not say the model stopped at its end-of-sequence token: failed as %s (in the error rate, a miss for every latency objective); --accept-empty, or accept_empty: true on a mix class, if the workload expects empty replies", p.emptyFailed, loadgen.ErrEmptyAnswer))
	}
	return w
}

// writeHistograms saves the run's metrics whole (histograms.json), for
// merging shards.
func writeHistograms(spec Spec, res *Result, bounds slo.Validity) error {
	st, err := res.Metrics.State()
	if err != nil {
		return &results.WriteError{Path: spec.Out.Path(results.HistogramsFile), Err: err}
	}
	form := spec.Records
	if form == "" {
		form = results.RecordsFull
	}
	h := &results.Histograms{Identity: Identity(spec), Info: res.Info.State(), Metrics: st, Records: form,
		Streaming: spec.Streaming, MaxErrorRate: bounds.ErrorRateLimit(), SelfCheckWarns: bounds.DistortionWarns, Validity: &bounds,
		Meta: results.HistogramsMeta{Version: spec.Meta.Version, Target: spec.Meta.Target, API: spec.Meta.API,
			Model: spec.Meta.Model, Load: spec.Meta.Load}}
	return spec.Out.WriteHistograms(h)
}

// Identity is what every shard of spec's schedule shares (see
// results.Histograms.Identity): the load block key by key, target, API,
// model, and spec.Identity.
func Identity(spec Spec) map[string]string {
	id := map[string]string{"target": spec.Meta.Target, "api": spec.Meta.API, "model": spec.Meta.Model,
		"shards": strconv.Itoa(max(1, spec.Options.Shard.Count))}
	for k, v := range spec.Meta.Load {
		id["load."+k] = fmt.Sprint(v)
	}
	for k, v := range spec.Identity {
		id[k] = v
	}
	return id
}
