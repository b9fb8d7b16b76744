// Package loadgen sends load to an inference server on a schedule and
// times every request, without coordinated omission: the runner, its
// schedules and session graphs, and the Record each request leaves, with
// that record's own figures (TTFT, TPOT, E2E, chunk gaps, schedule lag).
// Summing records up (the metric tables, HDR histograms, summary.json) is
// package loadgen/measure's, which imports loadgen; the runner never
// reads it.
//
// # Model
//
// A run flows one way:
//
//	Source ──► schedule ──► Runner ──► Client ──► Record ──► out channel ──► measure.Metrics, files, …
//	(what)     (when)       (goroutines) (one protocol) (one per request)
//
// In turn:
//   - A Source yields prompts in order (package prompts: mixes, traces,
//     multi-turn sessions); io.EOF ends a finite one.
//   - The schedule says when each request is due, its intended start.
//     Open loop: an arrival process (ArrivalConstant, ArrivalPoisson,
//     ArrivalGamma, ArrivalUniform) over Stages of rates and ramps, drawn
//     through the schedule's cumulative intensity. Trace replay
//     (Options.Trace): each prompt's own At. Closed
//     loop: Stage.Concurrency workers, each sending its next request when
//     its previous one ends, so the intended start is the send.
//   - The Runner sends each request at its intended start on its own
//     goroutine, up to Options.MaxInFlight at once.
//   - A Client (package loadgen/openai, …) turns one prompt into one
//     request and fills the Record as the answer streams in.
//   - Run delivers every Record, finalized, on its out channel: completed,
//     failed, cancelled, cut and dropped alike. One goroutine consumes it
//     (measure.Metrics is not safe for concurrent use).
//
// # Intended start
//
// Every latency (TTFT, E2E, …) runs from the intended start, not from the
// send: a stalled server, a full in-flight cap or a late generator all
// show in the figures instead of hiding in them. Schedule lag (send −
// intended start) is the generator's own lateness; the summary's
// self-check (package loadgen/selfcheck) flags a run where it is sustained and large against the
// latencies measured, or where the generator's CPU is saturated. In
// closed loop the intended start is the send.
//
// # How a run ends
//
// The schedule ends at the last stage's end, or sooner when
// Options.Requests have been sent or the source is exhausted. Requests in
// flight then get Options.Grace (30 s by default) to finish; those still
// running are cancelled and recorded as ErrCutAtEnd, counted apart from
// errors. Requests due but never started because the in-flight cap stayed
// full are ErrDropped. Cancelling Run's context (the user's interrupt,
// Info.Interrupted) or calling Runner.Stop (the caller's own decision,
// Info.Stopped) ends sending at once and cancels requests in flight
// (ErrCancelled).
//
// # Time
//
// The runner reads the clock only through package time (time.Now, timers)
// and the schedule is offsets from the epoch, so tests run it under
// testing/synctest's fake clock, where every send is exactly on time.
// The dispatcher's waiter yields before a due time only after its timer
// woke late, which a fake clock never does, so it never spins there.
//
// # Who owns which Record field
//
// The runner sets Seq, ID, Class, Stage, Session, Turn, Warmup,
// RequestedInputTokens and Intended before Do; after it, End if the
// client left it 0, and the kind and message of a request it cut
// (ErrCutAtEnd) or dropped (ErrDropped). The client owns the rest: Sent,
// Chunks, FirstAnswer, token counts and their sources, Status, ErrorKind
// and Error, FinishReason, Unstreamed, Retries, and Text, which it keeps
// only for a prompt with a FollowUp (the next turn needs the answer).
//
// The runner calls Record.Finalize exactly once on every record, after
// Do returns and before the record is delivered, so token counts are
// settled on whatever reads the channel. Clients and consumers do not
// call it.
//
// # Figures
//
// A Record's figures (Record.TTFT, Record.EachITL, ScheduleLagOf, …) take
// every instant truncated to the microsecond, as requests.jsonl stores it,
// so a live record and its saved copy measure the same. Package
// loadgen/measure accumulates records into HDR histograms and builds
// summary.json from them.
package loadgen
