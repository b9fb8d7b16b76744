package sim

import (
	"context"
	"strconv"
	"time"
)

// An exchange is one inference request on its way through the simulator,
// whatever protocol brought it: OpenAI, KServe gRPC, Triton's HTTP
// generate, TGI or Ollama. run gives every protocol the same gate, faults,
// token timing (the engine, or fixed delays), metrics and truth; the
// protocol only says, through its answer, how each step looks on its wire.
//
// Faults, in the order run meets them (a request's fault comes from its
// X-Sim-Fault header, KIND or KIND=DURATION, else from Config.Faults):
//
//   - once a global stall (StallAll) lets the request through: http_429
//     and http_503 (and html_200 where the protocol has a page to send)
//     are answered at once, before any output; hang sends nothing until
//     the client or the server gives up;
//   - stall (the first token late) and stall_mid (a pause before the
//     mid-stream chunk), each by the header's duration or Config.StallFor,
//     are the token timing's (runOnEngine, runOnTimer);
//   - truncate, error_in_stream and malformed fire before the content
//     chunk at half of them, rounded down (mid), in the protocol's form.
//   - empty makes every token and sends none: the answer ends as usual,
//     with usage of 0 completion tokens.
type exchange struct {
	s        *Server
	ctx      context.Context
	rec      *truthRec
	id       string
	seqNo    int64
	arrived  time.Time
	fault    FaultKind
	faultFor time.Duration

	stream  bool     // answered chunk by chunk; else once, when the answer is complete
	prompt  int      // prompt tokens
	max     int      // tokens generated
	content int      // tokens sent: max, or max−1 when the last is an unsent EOS
	mid     int      // content chunks before a mid-stream fault fires
	engine  int      // the engine serving it (0 in ModeFixed): whose series it feeds
	blocks  []uint64 // the prompt's full blocks' hashes (nil: not cached)
	cached  int      // prompt tokens the prefix cache held, known at admission
	tool    bool     // answered with a tool call: finish_reason "tool_calls"

	sent, chunks int       // content tokens and chunks sent (or, not streaming, made)
	admitted     time.Time // left the queue
	first        time.Time // streaming: the first content chunk sent; else the answer complete
	last         time.Time // the last content chunk sent (or made)
	onAdmit      func()    // the protocol's, told on admission (Triton's pending gauge)
}

// An answer is how one protocol puts an exchange on its wire. run calls it
// at each step; the truth's outcome and the metrics are run's.
type answer interface {
	// refuse answers fault f at once with an error and no answer,
	// recording the status in the truth, and reports true; false if the
	// protocol has no answer for f (the request goes on).
	refuse(f FaultKind) bool
	// start opens the answer (headers, a first event); false if the
	// client is gone.
	start() bool
	// chunk sends one content chunk of n tokens, the last if final
	// (streaming only; the exchange's sent already counts them); false if
	// the client is gone.
	chunk(text []byte, n int, final bool) bool
	// midFault fires a mid-stream fault (truncate, error_in_stream,
	// malformed). fired is false where the protocol has no form for it;
	// goOn is false when the answer ended. Truncation may not return: it
	// aborts the connection.
	midFault(f FaultKind) (fired, goOn bool)
	// finish ends a complete answer.
	finish()
}

// ending is how run ended an exchange, for its protocol to answer.
type ending int

const (
	endAnswered  ending = iota // every token sent and the answer finished
	endRefused                 // a fault or status answered at once (answer.refuse)
	endHung                    // fault hang: the client or the server gave up
	endFaulted                 // a mid-stream fault ended the answer
	endCancelled               // the client went away or the server closed
)

// newExchange registers a request's arrival: its number, its id (the
// client's, else "sim-N") and its truth record.
func (s *Server) newExchange(ctx context.Context, id, path string, arrived time.Time) *exchange {
	seqNo := s.seq.Add(1)
	if id == "" {
		id = "sim-" + strconv.FormatInt(seqNo, 10)
	}
	rec := s.truth.begin(Truth{ID: id, Seq: seqNo, Path: path, Arrived: arrived}, 0)
	return &exchange{s: s, ctx: ctx, rec: rec, id: id, seqNo: seqNo, arrived: arrived}
}

// pickFault sets the exchange's fault from an X-Sim-Fault header's value,
// else from the fault rules.
func (x *exchange) pickFault(header string) error {
	s := x.s
	if header != "" {
		k, d, err := parseFaultHeader(header)
		if err != nil {
			return err
		}
		x.fault, x.faultFor = k, d
	} else {
		x.fault = pickFault(*s.faults.Load(), s.cfg.Seed, x.seqNo)
	}
	if x.faultFor == 0 {
		x.faultFor = s.cfg.StallFor
	}
	return nil
}

// shape sets what the request asks for, once it is parsed: prompt tokens,
// max tokens to generate, content of them to send, and whether the answer
// streams.
func (x *exchange) shape(prompt, max, content int, stream bool) {
	tpc := x.s.cfg.TokensPerChunk
	if x.fault == FaultEmpty {
		content = 0 // made, never sent
	}
	x.prompt, x.max, x.content, x.stream = prompt, max, content, stream
	x.mid = (content + tpc - 1) / tpc / 2
	x.rec.update(func(t *Truth) {
		t.Stream, t.Fault = stream, x.fault
		t.PromptTokens, t.MaxTokens = prompt, max
		if stream {
			t.Chunks = make([]TruthChunk, 0, (max+tpc-1)/tpc)
		}
	})
}

func (x *exchange) outcome(o string) { x.rec.update(func(t *Truth) { t.Outcome = o }) }

// cancelled notes a request the client or the server gave up on.
func (x *exchange) cancelled() {
	x.rec.update(func(t *Truth) {
		if t.Outcome == "" {
			t.Outcome = "cancelled"
		}
	})
}

// run takes the exchange through the gate, its fault and the token timing,
// answering through a.
func (x *exchange) run(a answer) ending {
	s := x.s
	// A frozen server does nothing with new requests either.
	if _, ok := s.gate.sleepUntil(x.arrived, x.ctx.Done(), s.quit, nil); !ok {
		x.outcome("cancelled")
		return endCancelled
	}
	if a.refuse(x.fault) {
		x.outcome("fault")
		return endRefused
	}
	if x.fault == FaultHang {
		x.outcome("fault")
		select {
		case <-x.ctx.Done():
		case <-s.quit:
		}
		return endHung
	}
	if !a.start() {
		x.cancelled()
		s.metrics.engine(x.engine).successAbort.Inc()
		return endCancelled
	}
	faulted := false
	midDone := false
	send := func(n int) bool {
		if !midDone && x.chunks >= x.mid {
			midDone = true
			if k := x.fault; k == FaultTruncate || k == FaultErrorInStream || k == FaultMalformed {
				if k != FaultMalformed {
					x.outcome("fault") // before: truncation may not return
				}
				fired, goOn := a.midFault(k)
				if fired {
					x.outcome("fault")
				}
				if !goOn {
					faulted = true
					return false
				}
			}
		}
		start := x.sent
		x.sent += n // counted before the chunk goes: its answer may say how many so far
		x.chunks++
		began := time.Now() // before the write: no client can have read the chunk earlier
		if x.stream && !a.chunk(s.text.text(start, n), n, x.sent >= x.max) {
			return false
		}
		now := time.Now()
		m := s.metrics.engine(x.engine)
		switch {
		case start == 0:
			m.ttft.Observe(now.Sub(x.arrived).Seconds())
		case x.stream:
			m.itl.Observe(now.Sub(x.last).Seconds() / float64(n))
		}
		if x.stream {
			x.rec.chunk(began, now, n)
			if start == 0 {
				x.first = now
			}
		} else {
			x.first = now // one answer, at the end
		}
		x.last = now
		return true
	}
	done := x.produce(send)
	switch {
	case faulted:
		return endFaulted
	case !done:
		x.cancelled()
		s.metrics.engine(x.engine).successAbort.Inc()
		return endCancelled
	}
	completion, reason := x.sent, "length"
	if x.content < x.max && x.fault != FaultEmpty { // the unsent EOS
		completion, reason = x.max, "stop"
	}
	if x.tool {
		reason = "tool_calls"
	}
	x.rec.update(func(t *Truth) {
		t.CompletionTokens, t.FinishReason = completion, reason
		if !x.stream {
			t.OutputTokens = x.sent
		}
	})
	// Counted before the answer ends, so a scrape after it has them.
	m := s.metrics.engine(x.engine)
	m.e2e.Observe(time.Since(x.arrived).Seconds())
	m.successLen.Inc()
	a.finish()
	return endAnswered
}

// job is the exchange as runOnEngine and runOnTimer take it.
func (x *exchange) job() engineJob {
	return engineJob{prompt: x.prompt, max: x.max, arrived: x.arrived, fault: x.fault, faultFor: x.faultFor, mid: x.mid, seqNo: x.seqNo,
		blocks: x.blocks, hit: &x.cached}
}

// admit records the request's admission (left the queue).
func (x *exchange) admit(at time.Time) {
	x.admitted = at
	if x.onAdmit != nil {
		x.onAdmit()
	}
	x.rec.update(func(t *Truth) { t.Admitted, t.CachedTokens = at, x.cached })
}

// produce times the tokens, by the engine (ModeBatch) or fixed delays
// (ModeFixed), with the stall faults, calling send with each chunk's token
// count; an unsent EOS token is made, not sent. It reports whether every
// token was made (false: cancelled, the server closed or send refused).
func (x *exchange) produce(send func(n int) bool) bool {
	s := x.s
	tpc := s.cfg.TokensPerChunk
	if len(s.engines) > 0 {
		return s.runOnEngine(x.ctx, x.job(), func(i int) { x.engine = i }, x.admit, func(avail int) bool {
			limit := min(avail, x.content)
			for x.sent < limit {
				if !send(min(tpc, limit-x.sent)) {
					return false
				}
			}
			return true
		})
	}
	produced, prev := 0, time.Time{}
	admitted := func(at time.Time) {
		x.admit(at)
		prev = at
	}
	return s.runOnTimer(x.ctx, x.job(), admitted, func(n int, at time.Time) bool {
		produced += n
		if k := min(n, x.content-x.sent); k > 0 && !send(k) {
			return false
		}
		// llama.cpp's counters: one "decode" per produced chunk, the first
		// carrying the prompt's time, as a prefill would.
		took := at.Sub(prev)
		if produced == n {
			s.metrics.llama.add(x.prompt, took, 0, 0, 0, 0)
			s.metrics.llama.add(0, 0, n, 0, 1, int(s.fixedRunning.Load()))
		} else {
			s.metrics.llama.add(0, 0, n, took, 1, int(s.fixedRunning.Load()))
		}
		prev = at
		return true
	})
}
