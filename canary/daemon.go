package canary

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/slo"
)

// Options configure a Daemon.
type Options struct {
	// Version is tailgate's, for tailgate_build_info and /status;
	// Revision the VCS revision it was built from ("" lets package prom
	// read the toolchain's stamp).
	Version, Revision string
	// StateFile, if set, keeps the rolling windows across restarts: read
	// at start, written atomically at every evaluation and at shutdown.
	StateFile string
	// Log receives one line per evaluation interval, warnings, reloads
	// and errors (nil: discarded).
	Log io.Writer
	// StopTimeout bounds how long a stopping probe loop (shutdown, or a
	// reload that changed its target) may take to hand back its cancelled
	// probes; 0 means 10s.
	StopTimeout time.Duration
	// PrepareRetry is how often a target that could not be prepared at
	// start (a KServe model's tensors: protocol.Preparer) is asked again,
	// while it is probed, until it answers; 0 means 10s.
	PrepareRetry time.Duration
	// Sinks, if set, makes more sinks for a target's probes (live OTLP
	// export), at every start of its probe loop; nil: none. A sink's
	// final flush is the caller's, after Wait.
	Sinks func(t Target) []pipeline.Sink
}

// forever is the length of a canary's one load stage: a pipeline that
// never ends (a century; the runner's timers take it).
const forever = 100 * 365 * 24 * time.Hour

// defaultPrepareRetry is Options.PrepareRetry's default.
const defaultPrepareRetry = 10 * time.Second

// restartDelay is the pause before a probe loop that ended on its own
// (its prompt source failed) starts again.
const restartDelay = 5 * time.Second

// Daemon probes every target of a canary file on its schedule, judges
// each SLO objective over rolling windows, and serves /metrics, /healthz,
// /readyz and /status. A target that is down or slow burns budget; it
// never stops the daemon. Reload re-reads the file; an invalid file
// leaves the running configuration in place.
type Daemon struct {
	path    string
	opts    Options
	metrics *prom.Metrics
	log     *log.Logger
	started time.Time

	reloadMu sync.Mutex // one reload at a time

	mu        sync.Mutex
	cfg       *Config
	loadedAt  time.Time
	reloadErr string
	stateErr  string // why the latest state-file write failed; "" after a success
	states    map[stateKey]*objState
	stats     map[string]*targetStats
	runs      map[string]*targetRun
	ctx       context.Context // Start's: probe loops derive from it
	stop      context.CancelFunc

	ready    atomic.Bool
	ln       net.Listener
	srv      *http.Server
	serveErr chan error
	evalDone chan struct{}
}

type stateKey struct{ target, slo, objective string }

// objState is one objective of one target: what it is and its windows.
type objState struct {
	spec   *slo.Spec
	obj    *slo.Objective
	budget float64
	win    *windows
}

// targetStats are a target's probe counts since the daemon started.
type targetStats struct {
	ok, failed             uint64
	lastSuccess, lastError time.Time
	lastErrorText          string
	// lastProgress is when the probe loop last finished a probe, or
	// started: /healthz fails when it stops moving.
	lastProgress time.Time
}

type targetRun struct {
	t      Target
	cancel context.CancelFunc
	done   chan struct{}
}

// New loads the canary file at path. An error is the file's (located) or
// a file it names; nothing is started.
func New(path string, opts Options) (*Daemon, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 10 * time.Second
	}
	w := opts.Log
	if w == nil {
		w = io.Discard
	}
	d := &Daemon{path: path, opts: opts, log: log.New(w, "", log.LstdFlags|log.LUTC),
		metrics: prom.New(prom.Options{Version: opts.Version, Revision: opts.Revision, Daemon: true, Histograms: cfg.Histograms}),
		states:  map[stateKey]*objState{}, stats: map[string]*targetStats{}, runs: map[string]*targetRun{}}
	d.started = time.Now()
	for _, w := range cfg.Warnings {
		d.log.Printf("canary: warning: %s", w)
	}
	d.install(cfg, d.started)
	d.metrics.SetReload(true, d.started)
	// A state file that cannot be read costs the history, not the canary.
	if n, err := d.loadState(d.started); err != nil {
		d.log.Printf("canary: warning: %v; starting with empty windows", err)
	} else if n > 0 {
		d.log.Printf("canary: restored the windows of %d objectives from %s", n, opts.StateFile)
	}
	return d, nil
}

// Metrics is the daemon's Prometheus registry holder.
func (d *Daemon) Metrics() *prom.Metrics { return d.metrics }

// Start listens on the configured address, starts every probe loop and
// the evaluation loop, and returns; the daemon runs until ctx ends (then
// Wait returns). The error is a listen failure, or a web_config (or a
// certificate, key or CA file it names) that cannot be read or used.
func (d *Daemon) Start(ctx context.Context) error {
	d.mu.Lock()
	cfg := d.cfg
	d.mu.Unlock()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("%s: listen: %w", cfg.File, err)
	}
	d.srv = &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serve := func() error { return d.srv.Serve(ln) }
	if cfg.WebConfig != "" {
		logger := slog.New(slog.NewTextHandler(d.log.Writer(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		tk, err := toolkit(cfg.WebConfig, d.srv.Handler, logger)
		if err != nil {
			ln.Close()
			return fmt.Errorf("%s: web_config %s: %w", cfg.File, cfg.WebConfig, err)
		}
		d.srv.Handler = probesOpen(d.srv.Handler, tk.guarded)
		if tk.tls != nil {
			d.srv.TLSConfig = tk.tls
			if !tk.http2 {
				d.srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
			}
			serve = func() error { return d.srv.ServeTLS(ln, "", "") }
		}
	}
	d.ln = ln
	d.serveErr = make(chan error, 1)
	go func() {
		err := serve()
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		d.serveErr <- err
	}()
	ctx, d.stop = context.WithCancel(ctx)
	d.mu.Lock()
	d.ctx = ctx
	for _, t := range cfg.Targets {
		d.startLocked(t)
	}
	d.mu.Unlock()
	d.ready.Store(true)
	d.log.Printf("canary: serving /metrics, /status, /healthz and /readyz on %s; %d targets, evaluation every %s",
		ln.Addr(), len(cfg.Targets), cfg.EvaluationInterval)
	d.evalDone = make(chan struct{})
	go d.evalLoop(ctx)
	return nil
}

// toolkitServing is what exporter-toolkit makes of a web_config: the
// handler behind its basic auth, headers and rate limit, and its TLS
// configuration (nil: plain HTTP), which re-reads the certificate and
// key at every connection as Prometheus' own servers do.
type toolkitServing struct {
	guarded http.Handler
	tls     *tls.Config
	http2   bool
}

// toolkit has exporter-toolkit (web.Serve) set up a server for h under the
// web config at file, on a listener that is already closed, and keeps what
// it set up: the toolkit has no other way to hand out its guarded handler
// and reloading TLS configuration, and the canary needs them apart, to
// answer the kubelet's probes without basic auth. web.Serve reads every
// file the config names first (web.Validate), so a certificate or key
// that cannot be read fails here, at the start, naming the file.
func toolkit(file string, h http.Handler, logger *slog.Logger) (toolkitServing, error) {
	if err := web.Validate(file); err != nil {
		return toolkitServing{}, err
	}
	noSystemd := false
	flags := &web.FlagConfig{WebConfigFile: &file, WebSystemdSocket: &noSystemd, WebListenAddresses: &[]string{}}
	s := &http.Server{Handler: h}
	err := web.Serve(closedListener{}, s, flags, logger)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return toolkitServing{}, err
	}
	if s.Handler == h {
		// A toolkit that stopped wrapping the handler would serve /metrics
		// unguarded; refuse rather than drop the config's basic auth.
		return toolkitServing{}, errors.New("exporter-toolkit did not set up its handler (basic auth); not serving without it")
	}
	tk := toolkitServing{guarded: s.Handler}
	// With TLS on, the toolkit sets the reloading GetConfigForClient (a
	// plain server may have a TLSConfig of net/http's own making), and
	// HTTP/2 unless the config turned it off (an empty TLSNextProto).
	if s.TLSConfig != nil && s.TLSConfig.GetConfigForClient != nil {
		tk.tls, tk.http2 = s.TLSConfig, s.TLSNextProto == nil || s.TLSNextProto["h2"] != nil
	}
	return tk, nil
}

// closedListener is a listener that is already closed: web.Serve returns
// at its first Accept, after setting up its server.
type closedListener struct{}

func (closedListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (closedListener) Close() error              { return nil }
func (closedListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// probesOpen answers /healthz and /readyz with open, everything else with
// guarded: kubelet probes carry no credentials, and the probes say only
// "alive" or "ready", never the metrics or the status.
func probesOpen(open, guarded http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz":
			open.ServeHTTP(w, r)
		default:
			guarded.ServeHTTP(w, r)
		}
	})
}

// Addr is the address the daemon listens on (after Start).
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// Wait (after Start) blocks until Start's context ends, then shuts down: it stops
// answering ready, cancels the probes in flight (they count nowhere: the
// canary cancelled them, the target did not fail them), waits for the
// probe loops within StopTimeout, writes a last evaluation line and
// closes the server. The error is the server's, if it failed.
//
// If the server fails, the daemon shuts down the same way and Wait
// returns the server's error (a web_config's certificate or key that
// cannot be read fails Start instead).
func (d *Daemon) Wait() error {
	var serveErr error
	served := true
	select {
	case <-d.ctx.Done():
	case serveErr = <-d.serveErr:
		served = false
		d.log.Printf("canary: the server failed: %v; shutting down", serveErr)
		if serveErr == nil {
			serveErr = errors.New("the server stopped")
		}
	}
	d.stop()
	d.ready.Store(false)
	d.mu.Lock()
	runs := d.runs
	d.runs = map[string]*targetRun{}
	d.mu.Unlock()
	d.stopRuns(runs)
	<-d.evalDone
	now := time.Now()
	d.logEvaluation(d.evaluate(now))
	if err := d.saveState(now); err != nil {
		d.log.Printf("canary: warning: %v", err)
	}
	if served {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.srv.Shutdown(sctx)
		serveErr = <-d.serveErr
	}
	d.log.Printf("canary: stopped")
	return serveErr
}

// Run is Start, then Wait.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.Start(ctx); err != nil {
		return err
	}
	return d.Wait()
}

// Reload re-reads the canary file. A valid one replaces the running
// configuration: targets that are new or changed (their settings, SLO or
// mix file) restart, the others keep probing; windows of objectives that
// remain keep their counts. An invalid one is logged, leaves everything
// running as it was, sets tailgate_config_last_reload_successful to 0 and
// is returned.
func (d *Daemon) Reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	now := time.Now()
	cfg, err := LoadConfig(d.path)
	if err != nil {
		d.metrics.SetReload(false, now)
		d.mu.Lock()
		d.reloadErr = err.Error()
		d.mu.Unlock()
		d.log.Printf("canary: reload failed, keeping the running configuration: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
		return err
	}
	d.mu.Lock()
	old := d.cfg
	for _, w := range cfg.Warnings {
		if !slices.Contains(old.Warnings, w) { // each warning once, not at every reload
			d.log.Printf("canary: warning: %s", w)
		}
	}
	if cfg.Listen != old.Listen || cfg.WebConfig != old.WebConfig {
		d.log.Printf("canary: warning: listen and web_config take effect at the next start (still serving %s)", old.Listen)
	}
	keep := map[string]string{}
	for _, t := range cfg.Targets {
		keep[t.Name] = t.fingerprint
	}
	stop := map[string]*targetRun{}
	for name, r := range d.runs {
		if fp, ok := keep[name]; !ok || fp != r.t.fingerprint {
			stop[name] = r
			delete(d.runs, name)
		}
	}
	d.mu.Unlock()
	d.stopRuns(stop)

	d.mu.Lock()
	defer d.mu.Unlock()
	d.install(cfg, now)
	if d.ctx != nil && d.ctx.Err() == nil {
		for _, t := range cfg.Targets {
			if _, running := d.runs[t.Name]; !running {
				d.startLocked(t)
			}
		}
	}
	d.reloadErr = ""
	d.metrics.SetReload(true, now)
	d.log.Printf("canary: reloaded %s: %d targets (%d restarted)", d.path, len(cfg.Targets), len(stop))
	return nil
}

// install makes cfg the running configuration's windows and metrics:
// objectives that remain keep their windows, those gone lose them and
// their series. Call with d.mu held (or before Start).
func (d *Daemon) install(cfg *Config, now time.Time) {
	want := map[stateKey]bool{}
	names := map[string]bool{}
	var specs []*slo.Spec
	for _, t := range cfg.Targets {
		names[t.Name] = true
		if _, ok := d.stats[t.Name]; !ok {
			d.stats[t.Name] = &targetStats{}
		}
		d.metrics.SetTargetInfo(t.Name, redactURL(t.URL), t.API, t.Model)
		specs = append(specs, t.SLO)
		for i := range t.SLO.Objectives {
			o := &t.SLO.Objectives[i]
			if !o.HasRecordEvents() {
				continue
			}
			k := stateKey{t.Name, t.SLO.Name, o.Name}
			want[k] = true
			b, _ := o.ErrorBudget()
			if st, ok := d.states[k]; ok {
				st.spec, st.obj, st.budget = t.SLO, o, b
				st.win.resize(t.SLO.Window)
				continue
			}
			d.states[k] = &objState{spec: t.SLO, obj: o, budget: b, win: newWindows(t.SLO.Window, now)}
		}
	}
	for k := range d.states {
		if !want[k] {
			delete(d.states, k)
			d.metrics.ForgetObjective(k.slo, k.objective, k.target)
		}
	}
	if d.cfg != nil {
		for _, t := range d.cfg.Targets {
			if !names[t.Name] {
				delete(d.stats, t.Name)
				d.metrics.Forget(t.Name)
			}
		}
		// Objective ratios of objectives no target has any more.
		ratios := map[[2]string]bool{}
		for k := range want {
			ratios[[2]string{k.slo, k.objective}] = true
		}
		for _, t := range d.cfg.Targets {
			for _, o := range t.SLO.Objectives {
				if o.HasRecordEvents() && !ratios[[2]string{t.SLO.Name, o.Name}] {
					d.metrics.ForgetObjective(t.SLO.Name, o.Name, "")
				}
			}
		}
	}
	d.metrics.SetHistogramMode(cfg.Histograms)
	d.metrics.SetSpecs(specs)
	d.cfg, d.loadedAt = cfg, now
}

// startLocked starts t's probe loop; d.mu is held.
func (d *Daemon) startLocked(t Target) {
	ctx, cancel := context.WithCancel(d.ctx)
	r := &targetRun{t: t, cancel: cancel, done: make(chan struct{})}
	d.runs[t.Name] = r
	if st, ok := d.stats[t.Name]; ok {
		st.lastProgress = time.Now()
	}
	go d.probeLoop(ctx, t, r.done)
}

// stopRuns cancels runs and waits for them, each within StopTimeout.
func (d *Daemon) stopRuns(runs map[string]*targetRun) {
	for _, r := range runs {
		r.cancel()
	}
	deadline := time.NewTimer(d.opts.StopTimeout)
	defer deadline.Stop()
	for name, r := range runs {
		select {
		case <-r.done:
		case <-deadline.C:
			d.log.Printf("canary: target %s: probes still in flight after %s; not waiting for them", name, d.opts.StopTimeout)
			return
		}
	}
}

// probeLoop runs t's never-ending pipeline: the runner sends a probe on
// t's schedule, the pipeline hands each record to the Prometheus sink
// (counters, histograms, SLI events into the windows) and to the stats.
// If the pipeline ever ends on its own it starts again.
func (d *Daemon) probeLoop(ctx context.Context, t Target, done chan struct{}) {
	defer close(done)
	client, prepare := d.open(ctx, t)
	if client == nil {
		return
	}
	if prepare != nil {
		prepared := make(chan struct{})
		go func() {
			defer close(prepared)
			d.prepareLater(ctx, t.Name, prepare)
		}()
		defer func() { <-prepared }()
	}
	classes := []string{"default"}
	if t.Mix != nil {
		classes = t.Mix.Classes()
	}
	sink := d.metrics.NewSink(prom.SinkOptions{Target: t.Name, Specs: []*slo.Spec{t.SLO}, Operate: true, Classes: classes,
		OnEvents: func(spec *slo.Spec, o *slo.Objective, e slo.Events, at time.Time) {
			d.mu.Lock()
			if st, ok := d.states[stateKey{t.Name, spec.Name, o.Name}]; ok {
				st.win.add(at, e)
			}
			d.mu.Unlock()
		}})
	stats := pipeline.Func(func(r *loadgen.Record) { d.noteRecord(t.Name, r) })
	sinks := []pipeline.Sink{sink, stats}
	if d.opts.Sinks != nil {
		sinks = append(sinks, d.opts.Sinks(t)...)
	}
	for ctx.Err() == nil {
		opts := loadgen.Options{Stages: []loadgen.Stage{{Name: "canary", Rate: t.Rate, Duration: forever}},
			Arrival: loadgen.ArrivalConstant, Timeout: t.Timeout, Grace: -1, Seed: uint64(time.Now().UnixNano())}
		if t.Interval > 0 && t.Jitter > 0 {
			opts.Arrival, opts.Jitter = loadgen.ArrivalUniform, t.Jitter.Seconds()/t.Interval.Seconds()
		}
		var src loadgen.Source = &loadgen.Repeat{Prompt: prompts.Prompt{Class: "default", Text: t.Prompt}}
		if t.Mix != nil {
			src = t.Mix.Source(int64(opts.Seed))
		}
		spec := pipeline.Spec{Client: client, Source: src, Options: opts, Streaming: t.Stream,
			Validity: slo.Unbounded(), KeepGoing: true}
		_, err := pipeline.Run(ctx, spec, sinks...)
		if ctx.Err() != nil {
			return
		}
		d.log.Printf("canary: target %s: probe loop ended (%v); starting again in %s", t.Name, err, restartDelay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartDelay):
		}
	}
}

// open builds t's client as every command does (protocol.Open: the API
// key, the client, the preflight and Prepare), or returns nil, logged,
// when t cannot be built (not probed until a reload fixes it). A failed
// preflight is logged in the server's words and the target probed anyway:
// a down target is what a canary measures. When the client still has to
// learn what its requests must carry (a KServe model's tensors), open
// returns it as prepare, to be asked again while probing.
func (d *Daemon) open(ctx context.Context, t Target) (client protocol.Client, prepare protocol.Preparer) {
	pt := protocol.Target{
		Endpoint: transport.Endpoint{URL: t.URL,
			Transport: transport.Config{Headers: t.Headers, Insecure: t.Insecure, CAFile: t.CAFile},
			Warn:      func(msg string) { d.log.Printf("canary: target %s: warning: %s", t.Name, msg) }},
		API: t.API, Model: t.Model, Stream: t.Stream, MaxTokens: t.MaxTokens, APIKeyFile: t.APIKeyFile}
	client, _, err := protocol.Open(ctx, pt)
	var ce *protocol.ConfigError
	if errors.As(err, &ce) {
		// Recorded before it is logged, so that whoever reads the log
		// line finds the error in /status too.
		msg := t.errText(ce.Err)
		d.noteError(t.Name, time.Now(), msg)
		d.log.Printf("canary: target %s: %s; not probing it until a reload fixes it", t.Name, msg)
		return nil, nil
	}
	if err != nil && ctx.Err() == nil {
		msg := t.errText(err)
		d.noteError(t.Name, time.Now(), "preflight: "+msg)
		d.log.Printf("canary: target %s: preflight: %s; probing anyway", t.Name, msg)
		prepare, _ = client.(protocol.Preparer)
	}
	return client, prepare
}

// prepareLater asks p to prepare every PrepareRetry until it has, or ctx
// ends: until then its probes carry the protocol's defaults (the vLLM
// backend's tensors), which another backend refuses. Failures are not
// logged again: open logged the first, and the probes show the rest.
func (d *Daemon) prepareLater(ctx context.Context, name string, p protocol.Preparer) {
	every := cmp.Or(d.opts.PrepareRetry, defaultPrepareRetry)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for tries := 1; ; tries++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := p.Prepare(ctx); err == nil {
			d.log.Printf("canary: target %s: prepared at try %d after the failed preflight; probes now carry what the model expects", name, tries+1)
			return
		}
	}
}

func (d *Daemon) noteRecord(target string, r *loadgen.Record) {
	if r.ErrorKind == loadgen.ErrCancelled {
		return
	}
	at := r.Epoch().Add(r.End)
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.stats[target]
	if !ok {
		return
	}
	s.lastProgress = time.Now()
	if r.OK() {
		s.ok++
		s.lastSuccess = at
		return
	}
	s.failed++
	s.lastError, s.lastErrorText = at, string(r.ErrorKind)+": "+r.Error
}

func (d *Daemon) noteError(target string, at time.Time, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.stats[target]; ok {
		s.lastError, s.lastErrorText = at, msg
	}
}

func (d *Daemon) evalLoop(ctx context.Context) {
	defer close(d.evalDone)
	d.mu.Lock()
	every := d.cfg.EvaluationInterval
	d.mu.Unlock()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			d.logEvaluation(d.evaluate(now))
			if err := d.saveState(now); err != nil {
				d.log.Printf("canary: warning: %v", err)
			}
			d.mu.Lock()
			if e := d.cfg.EvaluationInterval; e != every {
				every = e
				tick.Reset(every)
			}
			d.mu.Unlock()
		}
	}
}

// logEvaluation writes the one line of an evaluation: per target its
// probes and, per objective, the 5m and 1h burn rates and the budget left.
func (d *Daemon) logEvaluation(s *Status) {
	var b strings.Builder
	b.WriteString("canary: evaluation")
	for _, t := range s.Targets {
		fmt.Fprintf(&b, " | %s: %d ok %d failed", t.Name, t.Probes.OK, t.Probes.Failed)
		for _, o := range t.Objectives {
			// Coverage beside every figure: early in a canary's life a
			// "1h" burn rate is a few minutes' and the budget a few hours'.
			fmt.Fprintf(&b, "; %s burn 5m=%.2f (%.0f%% covered) 1h=%.2f (%.0f%%) budget=%.1f%% (%s %.1f%% covered)", o.Name,
				o.BurnRate("5m"), 100*o.Coverage("5m"), o.BurnRate("1h"), 100*o.Coverage("1h"), 100*o.BudgetRemaining,
				o.SLOWindow.Window, 100*o.SLOWindow.Coverage)
		}
	}
	d.log.Print(b.String())
}

// Handler serves /metrics (the gauges evaluated at the scrape), /status,
// /healthz and /readyz.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(d.metrics.Registry(), promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		d.evaluate(time.Now())
		metrics.ServeHTTP(w, r)
	})
	mux.HandleFunc("/status", d.serveStatus)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if stuck := d.stuck(time.Now()); stuck != "" {
			http.Error(w, "unhealthy: "+stuck, http.StatusServiceUnavailable)
			return
		}
		if e := d.stateWriteError(); e != "" {
			http.Error(w, "unhealthy: "+e+" (the windows are not kept: a restart would lose them)", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !d.ready.Load() {
			http.Error(w, "not ready: starting or shutting down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tailgate canary: /metrics /status /healthz /readyz\n")
	})
	return mux
}

// evaluate judges every objective's windows at now, sets the budget and
// burn-rate gauges, and returns the status.
func (d *Daemon) evaluate(now time.Time) *Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &Status{Schema: StatusSchema, Version: d.opts.Version, Started: d.started.UTC(), EvaluatedAt: now.UTC(),
		Config: ConfigStatus{File: d.cfg.File, LoadedAt: d.loadedAt.UTC(), LastReloadSuccessful: d.reloadErr == "",
			LastReloadError: d.reloadErr}}
	for _, t := range d.cfg.Targets {
		ts := TargetStatus{Name: t.Name, URL: redactURL(t.URL), Model: t.Model, Schedule: t.Schedule(), SLO: t.SLO.Name}
		if st, ok := d.stats[t.Name]; ok {
			ts.Probes = ProbeCounts{OK: st.ok, Failed: st.failed}
			ts.LastSuccess = timePtr(st.lastSuccess)
			ts.LastError = timePtr(st.lastError)
			ts.LastErrorText = st.lastErrorText
		}
		for i := range t.SLO.Objectives {
			o := &t.SLO.Objectives[i]
			st, ok := d.states[stateKey{t.Name, t.SLO.Name, o.Name}]
			if !ok {
				ts.NotJudged = append(ts.NotJudged, NotJudged{Objective: o.Name, Metric: string(o.Metric), Reason: notJudgedReason(o.Metric)})
				continue
			}
			ts.Objectives = append(ts.Objectives, d.judge(t.Name, st, now))
		}
		s.Targets = append(s.Targets, ts)
	}
	return s
}

// judge is one objective's windows at now; it sets the gauges.
func (d *Daemon) judge(target string, st *objState, now time.Time) ObjectiveStatus {
	o := st.obj
	os := ObjectiveStatus{Name: o.Name, Metric: string(o.Metric), Class: o.Class, Objective: 1 - st.budget, ErrorBudget: st.budget}
	for _, w := range burnWindows {
		e := st.win.minutes.sum(now, w.d)
		ws := windowStatus(w.label, e, st.budget)
		ws.Coverage = st.win.coverage(now, w.d)
		os.Windows = append(os.Windows, ws)
		d.metrics.SetBurnRate(st.spec.Name, o.Name, target, w.label, ws.BurnRate)
		d.metrics.SetCoverage(st.spec.Name, o.Name, target, w.label, ws.Coverage)
	}
	e := st.win.hours.sum(now, st.spec.Window)
	os.SLOWindow = windowStatus(windowLabel(st.spec.Window), e, st.budget)
	os.SLOWindow.Coverage = st.win.coverage(now, st.spec.Window)
	os.SLOWindow.SeenS = os.SLOWindow.Coverage * st.spec.Window.Seconds()
	d.metrics.SetCoverage(st.spec.Name, o.Name, target, os.SLOWindow.Window, os.SLOWindow.Coverage)
	os.BudgetRemaining = slo.BudgetRemaining(e.Bad, e.Total(), st.budget)
	d.metrics.SetBudgetRemaining(st.spec.Name, o.Name, target, os.BudgetRemaining)
	return os
}

func windowStatus(label string, e slo.Events, budget float64) WindowStatus {
	ws := WindowStatus{Window: label, Good: e.Good, Bad: e.Bad}
	if e.Total() > 0 {
		ws.ErrorRatio = float64(e.Bad) / float64(e.Total())
		ws.BurnRate = slo.BurnRate(ws.ErrorRatio, budget)
	}
	return ws
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// windowLabel writes an SLO window in whole days or weeks when it is
// one ("30d"), as SLO files do.
func windowLabel(d time.Duration) string {
	day := 24 * time.Hour
	switch {
	case d%(7*day) == 0:
		return fmt.Sprintf("%dw", d/(7*day))
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	}
	return d.String()
}

// stuck names the first target whose probe loop has finished no probe for
// far longer than its schedule and timeout allow (a wedged loop: the
// liveness probe should restart the canary), or "".
func (d *Daemon) stuck(now time.Time) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, r := range d.runs {
		select {
		case <-r.done:
			continue // ended on its own (a client it could not build): logged, not stuck
		default:
		}
		st, ok := d.stats[name]
		if !ok || st.lastProgress.IsZero() {
			continue
		}
		if idle, limit := now.Sub(st.lastProgress), stuckAfter(r.t); idle > limit {
			return fmt.Sprintf("target %s: no probe finished for %s (its schedule and timeout allow %s)",
				name, idle.Round(time.Second), limit)
		}
	}
	return ""
}

// stuckAfter is how long a probe loop may go without finishing a probe:
// three of its longest gaps between probes plus the probe timeout, and a
// minute's slack.
func stuckAfter(t Target) time.Duration {
	gap := t.Interval + t.Jitter
	if t.Interval <= 0 && t.Rate > 0 {
		gap = time.Duration(float64(time.Second) / t.Rate)
	}
	return 3*(gap+t.Timeout) + time.Minute
}
