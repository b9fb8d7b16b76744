// Package schema is summary.json's schema (tailgate.summary/v1) and the
// mergeable metrics state kept beside it (histograms.json): plain types
// that loadgen fills, slo judges and results reads and writes, defined
// once, below all three.
package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
)

// SummarySchema names the summary.json contract. Scripts and CI gates read
// it: keys may be added, never renamed or given another meaning.
const SummarySchema = "tailgate.summary/v1"

// Hist is the H shape of summary.json: milliseconds as floats.
type Hist struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Quantile is the percentile q (0.5, 0.9, 0.95, 0.99, 0.999) of h; it
// panics on any other q, which only a wrong metric-table row can ask for.
func (h Hist) Quantile(q float64) float64 {
	switch q {
	case 0.5:
		return h.P50
	case 0.9:
		return h.P90
	case 0.95:
		return h.P95
	case 0.99:
		return h.P99
	case 0.999:
		return h.P999
	}
	panic(fmt.Sprintf("schema: Hist has no percentile %g", q))
}

// HistOf summarises an HDR histogram of microseconds.
func HistOf(h *hdrhistogram.Histogram) Hist {
	if h.TotalCount() == 0 {
		return Hist{}
	}
	ms := func(v int64) float64 { return float64(v) / 1000 }
	// hdrhistogram-go's ValueAtQuantile takes 0–100.
	return Hist{Count: h.TotalCount(), Mean: h.Mean() / 1000, Min: ms(h.Min()),
		P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P95: ms(h.ValueAtQuantile(95)),
		P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max())}
}

// Counts is the requests block.
type Counts struct {
	Sent     int64 `json:"sent"`
	OK       int64 `json:"ok"`
	Errors   int64 `json:"errors"`
	Dropped  int64 `json:"dropped"`
	CutAtEnd int64 `json:"cut_at_end"` // not in Errors: the generator cut them (see loadgen.Options.Grace)
	// Cancelled were in flight when the run stopped itself (Ctrl-C, a
	// failed sink): not in Errors, never a failure of the server.
	Cancelled int64 `json:"cancelled,omitempty"`
	// Retries counts requests sent again on a fresh connection after a
	// reused idle one failed before any response byte (the latency still
	// counts from the intended start).
	Retries      int64            `json:"retries"`
	Warmup       int64            `json:"warmup,omitempty"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	// FirstErrors is, per error kind, the error of the failed request
	// intended earliest ("request <seq>: <the server's words>"), scrubbed
	// as requests.jsonl holds it.
	FirstErrors map[string]string `json:"first_errors,omitempty"`
}

// Throughput is the throughput block. Completions (requests_per_s, tokens,
// goodput) are per second of the measured window, which includes the
// drain after the schedule; offered and sent rates are per second of the
// scheduled window, which does not (see summary.json's definitions).
type Throughput struct {
	RequestsPerS     float64 `json:"requests_per_s"` // the completion rate
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	InputTokensPerS  float64 `json:"input_tokens_per_s"`
	// GoodputPerS is absent when no completion could be judged against the
	// goodput constraints (unstreamed answers against a TPOT limit).
	GoodputPerS      *float64 `json:"goodput_per_s,omitempty"`
	OfferedPerS      float64  `json:"offered_per_s,omitempty"`
	SentPerS         float64  `json:"sent_per_s,omitempty"`
	ScheduledWindowS float64  `json:"scheduled_window_s,omitempty"`
	MeasuredWindowS  float64  `json:"measured_window_s,omitempty"`
	// Extra holds the rates of rate rows made outside loadgen
	// (measure.NewRateMetric) by name, written into the block beside the fields.
	Extra map[string]float64 `json:"-"`
}

// Tokens says how many tokens were moved and where the counts came from.
type Tokens struct {
	Input             int64            `json:"input"`
	RequestedInput    int64            `json:"requested_input"`
	Output            int64            `json:"output"`
	Sources           map[string]int64 `json:"sources"`
	ChunkTokenSources map[string]int64 `json:"chunk_token_sources"`
}

// ClassSummary is one entry of classes.
type ClassSummary struct {
	Requests   Counts          `json:"requests"`
	Throughput Throughput      `json:"throughput"`
	LatencyMs  map[string]Hist `json:"latency_ms"`
	Tokens     Tokens          `json:"tokens"`
}

// RunInfo is the run block.
type RunInfo struct {
	Started         string         `json:"started"`
	Ended           string         `json:"ended"`
	DurationS       float64        `json:"duration_s"`
	MeasuredWindowS float64        `json:"measured_window_s"`
	Target          string         `json:"target"`
	API             string         `json:"api"`
	Model           string         `json:"model"`
	Load            map[string]any `json:"load"`
	Interrupted     bool           `json:"interrupted"`
	Stopped         string         `json:"stopped,omitempty"` // why the tool stopped the run early
	GraceS          float64        `json:"grace_s"`
	CPUUtilization  float64        `json:"cpu_utilization"`
	// Shard is set when the run sent one shard of a split schedule.
	Shard *ShardInfo `json:"shard,omitempty"`
	// Merged is set on a result merged from shards (tailgate merge).
	Merged *MergedInfo `json:"merged,omitempty"`
	// Preconnect says whether connections were opened before the first
	// intended start (--preconnect), and how long that took: set-up time
	// kept apart from every request's latency.
	Preconnect Preconnect `json:"preconnect"`
}

// ShardInfo is run.shard: which part of a split schedule a run sent.
type ShardInfo struct {
	Index   int     `json:"index"`
	Count   int     `json:"count"`
	StartAt string  `json:"start_at,omitempty"` // the shared start (--start-at), RFC 3339
	LateByS float64 `json:"late_by_s"`          // how long after start_at the shard began
}

// MergedInfo is run.merged: the shards a merged result was made of.
type MergedInfo struct {
	Count  int           `json:"count"`
	Shards []MergedShard `json:"shards"`
}

// MergedShard is one shard of a merged result.
type MergedShard struct {
	Index          int     `json:"index"`
	Dir            string  `json:"dir"`
	Started        string  `json:"started"`
	LateByS        float64 `json:"late_by_s"`
	CPUUtilization float64 `json:"cpu_utilization"`
	Sent           int64   `json:"sent"`
	Records        string  `json:"records,omitempty"` // the form its records were kept in
}

// Preconnect is run.preconnect.
type Preconnect struct {
	Used        bool    `json:"used"`
	Connections int     `json:"connections,omitempty"`
	SetupMs     float64 `json:"setup_ms,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Summary is summary.json (schema tailgate.summary/v1). Keys may be added,
// never renamed.
type Summary struct {
	Schema      string                  `json:"schema"`
	Tool        version.Tool            `json:"tool"`
	Run         RunInfo                 `json:"run"`
	Requests    Counts                  `json:"requests"`
	Throughput  Throughput              `json:"throughput"`
	LatencyMs   map[string]Hist         `json:"latency_ms"`
	Tokens      Tokens                  `json:"tokens"`
	Classes     map[string]ClassSummary `json:"classes"`
	Stages      map[string]ClassSummary `json:"stages,omitempty"` // by load stage, when there are several
	Turns       map[string]Hist         `json:"ttft_by_turn_ms,omitempty"`
	Sessions    *SessionSummary         `json:"sessions,omitempty"`
	SelfCheck   selfcheck.Result        `json:"self_check"`
	Warnings    []string                `json:"warnings"`
	Definitions map[string]string       `json:"definitions"`
}

// throughputFields is Throughput without its methods, for encoding/json.
type throughputFields Throughput

// knownThroughputKeys are the JSON keys of Throughput's own fields.
var knownThroughputKeys = func() map[string]bool {
	k := map[string]bool{}
	t := reflect.TypeFor[throughputFields]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			k[name] = true
		}
	}
	return k
}()

// MarshalJSON writes the fields, then Extra's rates under their names.
func (t Throughput) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(throughputFields(t))
	if err != nil || len(t.Extra) == 0 {
		return b, err
	}
	extra, err := json.Marshal(t.Extra) // sorted keys
	if err != nil {
		return nil, err
	}
	if len(b) == 2 { // {}
		return extra, nil
	}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
}

// UnmarshalJSON reads the fields, and keys of no field into Extra.
func (t *Throughput) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, (*throughputFields)(t)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for k, raw := range all {
		if knownThroughputKeys[k] {
			continue
		}
		var v float64
		if json.Unmarshal(raw, &v) != nil {
			continue // not a rate: nothing of ours
		}
		if t.Extra == nil {
			t.Extra = map[string]float64{}
		}
		t.Extra[k] = v
	}
	return nil
}

// SessionSummary is summary.json's "sessions": counts, the duration of
// complete sessions, and TTFT and E2E of the first turn ("0") and of the
// later ones ("1+").
type SessionSummary struct {
	Count          int64                      `json:"count"`
	OK             int64                      `json:"ok"`
	Failed         int64                      `json:"failed"`
	Cut            int64                      `json:"cut"`
	CancelledCalls int64                      `json:"cancelled_calls"`
	DurationMs     Hist                       `json:"duration_ms"`
	Turns          map[string]map[string]Hist `json:"turns,omitempty"`
	// PromisedPrefixShare is the prefix share the traces' hash ids
	// promise over every session that has them; ServerPrefixHitRate is
	// what the server measured over the run (vLLM's prefix-cache hits /
	// queries, from the telemetry): the two side by side say whether the
	// cache kept what the sessions share. Each is absent when unknown.
	PromisedPrefixShare *float64 `json:"promised_prefix_share,omitempty"`
	ServerPrefixHitRate *float64 `json:"server_prefix_hit_rate,omitempty"`
}

// SetServerPrefixHitRate sets the server's measured prefix-cache hit
// rate beside the promise, when there are sessions and a rate.
func (s *SessionSummary) SetServerPrefixHitRate(rate *float64) {
	if s != nil && rate != nil {
		v := *rate
		s.ServerPrefixHitRate = &v
	}
}

// SummaryMeta is what the caller knows that the metrics do not: the tool
// version and the run block's target, API, model and load.
type SummaryMeta struct {
	Version, Target, API, Model string
	Load                        map[string]any
}
