package schema

import "github.com/tailgate-llm/tailgate/loadgen/selfcheck"

// FirstError is the first failed record of one kind: its intended start
// (which orders shards as it orders records), sequence number and error
// text, scrubbed as the record holds it.
type FirstError struct {
	IntendedNs int64  `json:"intended_ns"`
	Seq        int64  `json:"seq"`
	Error      string `json:"error"`
}

// SessionsState is loadgen's session counters in histograms.json.
type SessionsState struct {
	Count          int64             `json:"count"`
	OK             int64             `json:"ok"`
	Failed         int64             `json:"failed"`
	Cut            int64             `json:"cut"`
	CancelledCalls int64             `json:"cancelled_calls"`
	Duration       string            `json:"duration"`
	TurnE2E        map[string]string `json:"e2e_by_turn,omitempty"`
	Promised       int64             `json:"promised_prefix_tokens,omitempty"`
	PromisedOf     int64             `json:"promised_of_tokens,omitempty"`
}

// MetricsState is measure.Metrics whole, in a form that outlives the process: every
// group's counters and HDR histograms (compressed, base64, the HdrHistogram
// V2 encoding), so shards run apart can be merged into exactly the metrics
// one process would have gathered. Times are nanoseconds from the run's
// epoch.
type MetricsState struct {
	All      GroupState            `json:"all"`
	Classes  map[string]GroupState `json:"classes"`
	Stages   map[string]GroupState `json:"stages"`
	Warmup   int64                 `json:"warmup"`
	TurnTTFT map[string]string     `json:"ttft_by_turn,omitempty"`
	Sessions *SessionsState        `json:"sessions,omitempty"`
	// LagCorrected are measure.Metrics.LagCorrected.
	LagCorrected map[string]string `json:"lag_corrected,omitempty"`
}

// GroupState is one measure.Group.
type GroupState struct {
	Sent                 int64                 `json:"sent"`
	OK                   int64                 `json:"ok"`
	Errors               int64                 `json:"errors"`
	Dropped              int64                 `json:"dropped"`
	Retries              int64                 `json:"retries"`
	ErrorsByKind         map[string]int64      `json:"errors_by_kind"`
	FirstErrors          map[string]FirstError `json:"first_errors,omitempty"`
	InputTokens          int64                 `json:"input_tokens"`
	OutputTokens         int64                 `json:"output_tokens"`
	RequestedInputTokens int64                 `json:"requested_input_tokens"`
	Good                 int64                 `json:"good"`
	Unjudged             int64                 `json:"unjudged,omitempty"`
	TokenSources         map[string]int64      `json:"token_sources"`
	ChunkTokenSources    map[string]int64      `json:"chunk_token_sources"`
	FirstNs              int64                 `json:"first_ns"`
	LastNs               int64                 `json:"last_ns"`
	Seen                 bool                  `json:"seen"`
	Hist                 map[string]string     `json:"hist"`
	// Work and Ratios are the counts of rate rows made outside the
	// built-in table: a floor's work, and a ratio's bad and counted
	// records, by row name, so a merge rebuilds their rates.
	Work   map[string]int64    `json:"work,omitempty"`
	Ratios map[string][2]int64 `json:"ratios,omitempty"`
}

// InfoState is loadgen.Info in a form that outlives the process (histograms.json),
// so a merge can rebuild each shard's run. Durations are nanoseconds.
type InfoState struct {
	Started          string              `json:"started"` // RFC 3339, nanoseconds
	ElapsedNs        int64               `json:"elapsed_ns"`
	Interrupted      bool                `json:"interrupted"`
	Stopped          string              `json:"stopped,omitempty"`
	Sent             int64               `json:"sent"`
	Dropped          int64               `json:"dropped"`
	CutAtEnd         int64               `json:"cut_at_end"`
	GraceNs          int64               `json:"grace_ns"`
	ScheduledFromNs  int64               `json:"scheduled_from_ns"`
	ScheduledToNs    int64               `json:"scheduled_to_ns"`
	StageScheduledNs map[string]int64    `json:"stage_scheduled_ns"`
	CPUUtilization   float64             `json:"cpu_utilization"`
	ShardIndex       int                 `json:"shard_index"`
	ShardCount       int                 `json:"shard_count"`
	LateStartNs      int64               `json:"late_start_ns"`
	StartAt          string              `json:"start_at,omitempty"`
	Preconnected     bool                `json:"preconnected,omitempty"`
	PreconnectConns  int                 `json:"preconnect_conns,omitempty"`
	PreconnectNs     int64               `json:"preconnect_ns,omitempty"`
	PreconnectErr    string              `json:"preconnect_error,omitempty"`
	Host             *selfcheck.HostLoad `json:"host,omitempty"`
}
