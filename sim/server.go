package sim

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tailgate-llm/tailgate/prompts"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 32 << 20

// Server is the simulated endpoint. Create it with New, serve Handler, and
// Close it when done. It is safe for concurrent use.
type Server struct {
	cfg       Config
	epoch     time.Time
	quit      chan struct{}
	gate      *gate
	busy      *busyMeter
	metrics   *metrics
	truth     *truthStore
	engines   []*engine      // ModeBatch: Config.Engines of them; none in ModeFixed
	draining  []atomic.Bool  // engine i takes no new requests (RestartEngine)
	engReqs   []atomic.Int64 // requests in the hands of engine i
	rr        atomic.Uint64  // round-robin over the engines
	busy503   atomic.Int64   // requests counted against MaxQueue (Pending)
	scrapes   scrapeWatch
	watch     *stateWatch // Await's
	handler   http.Handler
	kserve    *kserve // the KServe-shaped protocols' shared part
	text      *textTable
	modelJSON []byte
	cache     *prefixCache // ModeFixed's prefix cache (nil: off or ModeBatch)

	seq    atomic.Int64
	faults atomic.Pointer[[]FaultRule]

	// ModeFixed gauges
	fixedRunning atomic.Int64
	fixedKV      atomic.Int64

	mu         sync.Mutex
	closed     bool
	active     int
	idle       chan struct{} // closed when active drops to 0
	stallTimer *time.Timer
	stallArmed bool
}

// New validates cfg (after filling defaults, see Config) and starts the
// engine.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.TokenCounter == nil {
		count, name, err := tokenCounter(cfg.Tokenizer)
		if err != nil {
			return nil, err
		}
		cfg.TokenCounter, cfg.Tokenizer = count, name
	}
	now := time.Now()
	watch := &stateWatch{}
	s := &Server{
		cfg:       cfg,
		epoch:     now,
		quit:      make(chan struct{}),
		gate:      newGate(now),
		busy:      newBusyMeter(now),
		watch:     watch,
		truth:     newTruthStore(cfg.TruthLimit, watch),
		text:      newTextTable(cfg.TokensPerChunk),
		modelJSON: appendJSONString(nil, cmp.Or(cfg.AnswerModel, cfg.Model)),
		idle:      make(chan struct{}),
	}
	close(s.idle)
	s.kserve = &kserve{s: s}
	rules := append([]FaultRule(nil), cfg.Faults...)
	s.faults.Store(&rules)
	states := []state{s}
	if cfg.Mode == ModeBatch {
		states = nil
		for i := range max(cfg.Engines, 1) {
			e := newEngine(cfg, now, s.gate, s.busy, s.quit)
			e.index, e.watch = i, watch
			if cfg.PrefixCacheBlocks > 0 {
				e.cache = newPrefixCache(cfg.PrefixCacheBlocks, cfg.BlockSize)
			}
			s.engines = append(s.engines, e)
			states = append(states, engineGauges{e})
		}
		s.draining = make([]atomic.Bool, len(s.engines))
		s.engReqs = make([]atomic.Int64, len(s.engines))
	} else if cfg.PrefixCacheBlocks > 0 {
		s.cache = newPrefixCache(cfg.PrefixCacheBlocks, cfg.BlockSize)
	}
	s.metrics = newMetrics(cfg, s, states, s.busy)
	for _, e := range s.engines {
		e.metrics = s.metrics
		go e.run()
	}
	s.handler = s.routes()
	return s, nil
}

// tokenCounter resolves Config.Tokenizer.
func tokenCounter(name string) (TokenCounter, string, error) {
	if name == TokenizerBytes4 {
		return EstimateTokens, name, nil
	}
	if name == "" {
		name = prompts.DefaultEncoding
	}
	tok, err := prompts.NewTokenizer(name)
	if err != nil {
		return nil, "", fmt.Errorf("sim: %w (or %s)", err, TokenizerBytes4)
	}
	return tok.Count, name, nil
}

// Config returns the configuration in effect (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// Handler serves the OpenAI-compatible API, /health and /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// StallAll freezes the whole server for d from now: no request is admitted,
// no token is produced or sent, and work in progress (an engine step, a
// fixed-mode delay) finishes d later, like a GC pause or a failover.
// Requests arriving meanwhile are accepted by the kernel but get nothing,
// not even headers, until it ends. /health, /metrics and /v1/models keep
// answering. A call during a stall extends it if it ends later.
func (s *Server) StallAll(d time.Duration) {
	s.gate.stall(d)
	s.watch.changed()
}

// Stalled reports whether a global stall is in effect now.
func (s *Server) Stalled() bool { return s.gate.stalled() }

// SetFaults replaces the fault rules for requests arriving from now on.
func (s *Server) SetFaults(rules []FaultRule) error {
	for i, r := range rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("sim: fault rule %d: %w", i, err)
		}
	}
	rules = append([]FaultRule(nil), rules...)
	s.faults.Store(&rules)
	return nil
}

// Truth returns what the server saw of every recorded completion request,
// finished (the last Config.TruthLimit) and in flight (End zero), in
// arrival order. The slices are copies.
func (s *Server) Truth() []Truth { return s.truth.all() }

// EnergyJoules is the simulated board's energy counter now, in joules: the
// truth that DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION reports (in mJ).
func (s *Server) EnergyJoules() float64 {
	return s.busy.energy(time.Now(), s.cfg.GPUIdleWatts, s.cfg.GPUMaxWatts)
}

// ResetTruth forgets the finished requests recorded so far.
func (s *Server) ResetTruth() { s.truth.reset() }

// Pending is the number of completion requests counted against
// Config.MaxQueue: from arrival until their handler returned, which is
// after the client has read the last byte. Zero without MaxQueue.
func (s *Server) Pending() int { return int(s.busy503.Load()) }

// InFlight is the number of completion requests being handled.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// WaitIdle waits until no completion request is being handled, so that
// Truth has every request's End.
func (s *Server) WaitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.active == 0 {
			s.mu.Unlock()
			return nil
		}
		idle := s.idle
		s.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closeWait bounds how long Close waits for handlers to return.
const closeWait = 5 * time.Second

// Close stops the engine, makes every handler still running return (hanging
// ones included), and waits for them, at most 5 s: a handler blocked writing
// to a client that stopped reading returns only when its connection is
// closed, so close the HTTP server as well (Running.Close does both, in the
// right order). New requests get 503.
func (s *Server) Close() error {
	s.beginClose()
	return s.waitClosed()
}

func (s *Server) beginClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.stallTimer != nil {
		s.stallTimer.Stop()
	}
	close(s.quit)
}

func (s *Server) waitClosed() error {
	for _, e := range s.engines {
		<-e.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	if err := s.WaitIdle(ctx); err != nil {
		return fmt.Errorf("sim: %d handlers still running %v after Close (blocked writing to a client that does not read?)",
			s.InFlight(), closeWait)
	}
	return nil
}

func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.active == 0 {
		s.idle = make(chan struct{})
	}
	s.active++
	s.watch.changed()
	if s.cfg.StallAt > 0 && !s.stallArmed {
		s.stallArmed = true
		d := s.cfg.StallFor
		s.stallTimer = time.AfterFunc(s.cfg.StallAt, func() { s.StallAll(d) })
	}
	return true
}

func (s *Server) leave() {
	s.mu.Lock()
	s.active--
	if s.active == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
	s.watch.changed()
}

// state, for the gauges.
func (s *Server) running() int {
	if len(s.engines) > 0 {
		n := 0
		for _, e := range s.engines {
			n += int(e.nRunning.Load())
		}
		return n
	}
	return int(s.fixedRunning.Load())
}

func (s *Server) waiting() int {
	n := 0
	for _, e := range s.engines {
		n += int(e.nWaiting.Load())
	}
	return n
}

func (s *Server) kvUsedTokens() int {
	if len(s.engines) > 0 {
		n := 0
		for _, e := range s.engines {
			n += int(e.nKV.Load())
		}
		return n
	}
	return int(s.fixedKV.Load())
}

var (
	serverHeader  = []string{"tailgate-sim/" + Version}
	versionHeader = []string{Version}
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		s.serveCompletion(w, r, true)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		s.serveCompletion(w, r, false)
	})
	mux.HandleFunc("GET /v1/models", s.serveModels)
	s.generateRoutes(mux) // Triton's /v2 endpoints (generate.go)
	s.nativeRoutes(mux)   // TGI's and Ollama's native APIs (native.go)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	var exposition http.Handler = promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
	if s.cfg.Metrics == MetricsLlamaCpp {
		exposition = http.HandlerFunc(s.metrics.llama.serve)
	}
	if s.cfg.MetricsFromLoop {
		exposition = s.fromLoop(exposition)
	}
	if s.cfg.Metrics != MetricsNone {
		mux.Handle("GET /metrics", s.scrapes.wrap(exposition))
	}
	// What the server says about itself: vLLM's /version, llama.cpp's
	// /props, Ollama's /api/version and /api/show.
	simVersion := "tailgate-sim-" + Version
	switch s.cfg.Profile {
	case ProfileOllama:
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Ollama is running") })
		mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"version": simVersion})
		})
		mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"details": map[string]string{"format": "gguf", "family": "llama"},
				"model_info": map[string]any{"llama.context_length": s.cfg.KVTokens}})
		})
	case ProfileLlamaCpp:
		mux.HandleFunc("GET /props", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"build_info": simVersion, "total_slots": s.cfg.Slots,
				"default_generation_settings": map[string]any{"n_ctx": s.cfg.KVTokens}})
		})
	default:
		mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"version": simVersion})
		})
	}
	var h http.Handler = mux
	if s.cfg.MaxQueue > 0 {
		h = s.refuseWhenBusy(mux)
	}
	var threads chan struct{}
	if s.cfg.HTTPThreads > 0 {
		threads = make(chan struct{}, s.cfg.HTTPThreads)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if threads != nil {
			// Like llama.cpp's HTTP thread pool: the request is not read
			// until a thread is free.
			select {
			case threads <- struct{}{}:
				defer func() { <-threads }()
			case <-r.Context().Done():
				return
			case <-s.quit:
				return
			}
		}
		hd := w.Header()
		hd["Server"] = serverHeader
		hd["X-Sim-Version"] = versionHeader
		h.ServeHTTP(w, r)
	})
}

// busyMessage is Ollama's answer when its queue is full.
const busyMessage = "server busy, please try again.  maximum pending requests exceeded"

// refuseWhenBusy refuses completion requests beyond Slots running and MaxQueue
// waiting with 503 and Ollama's words: {"error": …} on its native API,
// {"error": {"message": …}} on /v1, as Ollama answers each.
func (s *Server) refuseWhenBusy(next http.Handler) http.Handler {
	inFlight := &s.busy503
	limit := int64(s.cfg.Slots + s.cfg.MaxQueue)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !(r.URL.Path == "/api/chat" || strings.HasPrefix(r.URL.Path, "/v1/")) {
			next.ServeHTTP(w, r)
			return
		}
		if inFlight.Add(1) > limit {
			inFlight.Add(-1)
			s.watch.changed()
			if r.URL.Path == "/api/chat" {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": busyMessage})
			} else {
				writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{"message": busyMessage, "type": "api_error", "param": nil, "code": nil}})
			}
			return
		}
		defer s.watch.changed()
		defer inFlight.Add(-1)
		s.watch.changed()
		next.ServeHTTP(w, r)
	})
}

// fromLoop delays h until the inference loop is free (MetricsFromLoop): in
// ModeBatch the end of the step in progress, in ModeFixed the moment no
// request is in flight.
func (s *Server) fromLoop(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.engines) > 0 {
			select {
			case <-s.engines[0].loopFree():
			case <-r.Context().Done():
				return
			case <-s.quit:
			}
		} else if s.WaitIdle(r.Context()) != nil {
			return
		}
		h.ServeHTTP(w, r)
	})
}
