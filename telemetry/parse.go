package telemetry

import (
	"cmp"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ServerSample is one scrape of the serving side, normalised across vLLM,
// SGLang, TGI and Triton (one row per server in dialect.go). A nil field
// was not exposed. Gauges are as read; counters and histograms are the
// server's cumulative values since it started (subtract two readings, or
// use Run.Snapshot, for what happened in between). Where a server exposes
// several label sets (several model_name, engine or dp_rank values),
// request counts, tokens and histograms are summed and KV usage is the mean.
// When a Run merges several sources, the same rules apply across them and
// Sources lists those that answered.
type ServerSample struct {
	Family  Family   `json:"family"`
	Sources []string `json:"sources,omitempty"`
	// Running is the number of requests being executed (in the batch).
	Running *float64 `json:"running,omitempty"`
	// Waiting is the queue depth: requests accepted but not yet scheduled.
	Waiting *float64 `json:"waiting,omitempty"`
	// KVUsage is the fraction (0–1) of the KV cache in use.
	KVUsage *float64 `json:"kv_usage,omitempty"`
	// KVBlocksUsed and KVBlocksMax are TensorRT-LLM's KV-cache blocks in
	// use and in all (nv_trt_llm_kv_cache_block_metrics used and max,
	// trtllm-serve's trtllm_kv_cache_used_blocks and _max_blocks).
	KVBlocksUsed *float64 `json:"kv_blocks_used,omitempty"`
	KVBlocksMax  *float64 `json:"kv_blocks_max,omitempty"`
	// PromptTokens and GenerationTokens are cumulative token counters.
	PromptTokens     *float64 `json:"prompt_tokens_total,omitempty"`
	GenerationTokens *float64 `json:"generation_tokens_total,omitempty"`
	// QueueDelay, TTFT and E2E are the server's own cumulative latency
	// histograms in seconds. Triton's queue and e2e are µs counters, so
	// they carry only the +Inf bucket (a mean, no quantiles).
	QueueDelay *Histogram `json:"queue_delay,omitempty"`
	TTFT       *Histogram `json:"ttft,omitempty"`
	E2E        *Histogram `json:"e2e,omitempty"`
	// QueueDelayUnavailable says why a known server gives no queue-delay
	// buckets (one of the NoQueue… reasons); empty when it does, or when
	// the endpoint is not a known server.
	QueueDelayUnavailable string `json:"queue_delay_unavailable,omitempty"`
	// QueueDelayNote says what the queue delay measures where that is not
	// the engine's own queue (Triton with TensorRT-LLM: QueueTritonScheduler).
	QueueDelayNote string `json:"queue_delay_note,omitempty"`
	// GPUs are GPU gauges found on the endpoint (dcgm-exporter's DCGM_FI_*,
	// Triton's nv_gpu_*).
	GPUs []EndpointGPU `json:"gpus,omitempty"`
	// CacheHitRate is SGLang's sglang:cache_hit_rate (0–1), the mean over
	// its series.
	CacheHitRate *float64 `json:"cache_hit_rate,omitempty"`
	// ServerModel is the Triton model whose nv_inference_* series were
	// read (ParseOptions.ServerModel, or the only model loaded); empty
	// when they were summed over several models, and ServerModelNote then
	// says so.
	ServerModel     string `json:"server_model,omitempty"`
	ServerModelNote string `json:"server_model_note,omitempty"`

	kvSeries int // label sets KVUsage averages, for merging sources
	// series are the cumulative readings per series (label set), which a
	// Run takes increases of one by one, as Prometheus does.
	series seriesReadings
}

// seriesReadings holds one scrape's cumulative series, keyed by metric
// name and label set.
type seriesReadings struct {
	queue, ttft, e2e map[string]Histogram
	prompt, gen      map[string]float64
	// capacity counters and histograms by capKey
	counters map[capKey]map[string]float64
	hists    map[capKey]map[string]Histogram
}

// capKey names a capacity figure read per series (dialect.counters and
// .histograms).
type capKey string

const (
	capPreemptions  capKey = "preemptions"
	capPrefixQuery  capKey = "prefix_cache_queries"
	capPrefixHit    capKey = "prefix_cache_hits"
	capSpecDrafted  capKey = "spec_draft_tokens"
	capSpecAccepted capKey = "spec_accepted_tokens"
	capRetracted    capKey = "retracted_requests"
	capInferences   capKey = "triton_inferences"
	capExecutions   capKey = "triton_executions"
	capStepTokens   capKey = "tokens_per_step"
	capNextBatch    capKey = "tgi_batch_next_size"
	capForward      capKey = "tgi_batch_forward"
)

// capCounters and capHists are every row's capacity figures: a Run keeps
// an accumulator per key.
var capCounters, capHists = capFigures(dialects)

func capFigures(rows []dialect) (counters, hists []capFigure) {
	for _, d := range rows {
		counters, hists = append(counters, d.counters...), append(hists, d.histograms...)
	}
	return counters, hists
}

// ParseOptions say which series to read where a server exports several
// views of one thing.
type ParseOptions struct {
	// ServerModel is the Triton model the run targets (an ensemble, say):
	// nv_inference_* series are read from that model only, since an
	// ensemble's composing models count the same request again. Empty,
	// or not loaded: the only model, else every model summed (and
	// ServerSample.ServerModelNote says so).
	ServerModel string
}

// Reasons a queue_delay objective has no data (ServerSample,
// Snapshot and Summary QueueDelayUnavailable; Histogram.Missing).
const (
	NoQueueLlamaCPP   = "llama.cpp exposes no queue-time histogram"
	NoQueueMeanOnly   = "Triton exposes queue time only as a cumulative counter: a mean, no buckets"
	NoQueueNoEndpoint = "no server /metrics endpoint was scraped"
	NoQueueNoScrape   = "no scrape of the server's /metrics succeeded"
	NoQueueNoMetrics  = "the server serves no metrics endpoint (HTTP 404 or 501; Ollama has none)"
	NoQueueNotExposed = "no scraped endpoint exposes a known queue-delay histogram"
)

// QueueTritonScheduler is the QueueDelayNote of Triton serving TensorRT-LLM.
const QueueTritonScheduler = "Triton's nv_inference_queue_duration_us is the time in Triton's own scheduler, before the TensorRT-LLM " +
	"executor; requests queued in the executor (nv_trt_llm_request_metrics waiting, the queue depth here) are not in it"

// ParseExposition reads Prometheus text exposition (format 0.0.4; metric
// names with ':' such as vllm:* are fine) and normalises it. A parse error
// part-way still returns what was read before it, with the error.
func ParseExposition(r io.Reader) (*ServerSample, error) {
	return ParseExpositionWith(r, ParseOptions{})
}

// ParseExpositionWith is ParseExposition with options.
func ParseExpositionWith(r io.Reader, o ParseOptions) (*ServerSample, error) {
	return parseDialects(r, o, dialects)
}

// parseDialects is ParseExpositionWith reading the servers of rows.
func parseDialects(r io.Reader, o ParseOptions, rows []dialect) (*ServerSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	return normalise(fams, o, rows), err
}

// reader reads the series of one scrape that tailgate uses: every series,
// except where a row's series hook picks some (SGLang's duplicated
// per-TP-rank series are read from one rank, Triton's from the model the
// run targets).
type reader struct {
	fams        map[string]*dto.MetricFamily
	rows        []dialect
	tritonModel string // "": every model
}

// metrics returns the series of family name that count.
func (rd *reader) metrics(name string) []*dto.Metric {
	if base, sel, ok := strings.Cut(name, "{"); ok {
		// name{label=value}: the series of base with that label value.
		k, v, _ := strings.Cut(strings.TrimSuffix(sel, "}"), "=")
		var out []*dto.Metric
		for _, m := range rd.metrics(base) {
			if label(m, k) == v {
				out = append(out, m)
			}
		}
		return out
	}
	ms := rd.fams[name].GetMetric()
	if i := dialectOf(rd.rows, name); i >= 0 && rd.rows[i].series != nil {
		return rd.rows[i].series(rd, name, ms)
	}
	return ms
}

// normalise maps parsed families onto a ServerSample, each figure from the
// first entry of the dialect table that gives it (see dialect).
func normalise(fams map[string]*dto.MetricFamily, o ParseOptions, rows []dialect) *ServerSample {
	s := &ServerSample{Family: detectFamily(fams, rows)}
	s.ServerModel, s.ServerModelNote = chooseTritonModel(fams, o.ServerModel)
	rd := &reader{fams: fams, rows: rows, tritonModel: s.ServerModel}
	sum := func(pick func(*figures) []gauge) (*float64, map[string]float64) {
		if v, _, per, ok := rd.firstGauge(tiers(rows, pick)); ok {
			return new(v), per
		}
		return nil, nil
	}
	s.Running, _ = sum(func(f *figures) []gauge { return f.running })
	s.Waiting, _ = sum(func(f *figures) []gauge { return f.waiting })
	s.KVBlocksUsed, _ = sum(func(f *figures) []gauge { return f.kvBlocksUsed })
	s.KVBlocksMax, _ = sum(func(f *figures) []gauge { return f.kvBlocksMax })
	if v, n, _, ok := rd.firstGauge(tiers(rows, func(f *figures) []gauge { return f.kvUsage })); ok {
		s.KVUsage, s.kvSeries = new(clamp01(v/float64(n))), n
	}
	s.PromptTokens, s.series.prompt = sum(func(f *figures) []gauge { return f.promptTokens })
	s.GenerationTokens, s.series.gen = sum(func(f *figures) []gauge { return f.generationTokens })

	var queueFrom latency
	s.QueueDelay, s.series.queue, queueFrom = rd.firstHist(tiers(rows, func(f *figures) []latency { return f.queue }))
	s.TTFT, s.series.ttft, _ = rd.firstHist(tiers(rows, func(f *figures) []latency { return f.ttft }))
	s.E2E, s.series.e2e, _ = rd.firstHist(tiers(rows, func(f *figures) []latency { return f.e2e }))
	switch {
	case s.QueueDelay != nil:
		if i := dialectOf(rows, queueFrom.name); i >= 0 && rows[i].queueNote != "" && fams[rows[i].queueNoteWith] != nil {
			s.QueueDelayNote = rows[i].queueNote
		}
		if s.QueueDelay.MeanOnly() {
			s.QueueDelayUnavailable = NoQueueMeanOnly
		}
	default:
		for _, d := range rows {
			if d.noQueue != "" && slices.Contains(strings.Split(string(s.Family), "+"), string(d.family)) {
				s.QueueDelayUnavailable = d.noQueue
				break
			}
		}
	}
	s.GPUs = endpointGPUs(fams, rows)
	rd.capacity(s)
	return s
}

// capacity reads the capacity figures: counters and histograms per
// series, and cache hit rates.
func (rd *reader) capacity(s *ServerSample) {
	for _, d := range rd.rows {
		for _, c := range d.counters {
			if _, n, per := rd.sumSeries(c.names); n > 0 && s.series.counters[c.key] == nil {
				if s.series.counters == nil {
					s.series.counters = map[capKey]map[string]float64{}
				}
				s.series.counters[c.key] = per
			}
		}
		for _, c := range d.histograms {
			if h, per, _ := rd.firstHist(seconds(c.names...)); h != nil && s.series.hists[c.key] == nil {
				if s.series.hists == nil {
					s.series.hists = map[capKey]map[string]Histogram{}
				}
				s.series.hists[c.key] = per
			}
		}
		if s.CacheHitRate == nil {
			if v, n, _ := rd.sumSeries(d.cacheHitRate); n > 0 {
				s.CacheHitRate = new(clamp01(v / float64(n)))
			}
		}
	}
}

// firstGauge reads the first of gs found: its value, the number of
// series it was summed from (1 for a ratio), and each series' value by
// key (nil for a ratio or a label value).
func (rd *reader) firstGauge(gs []gauge) (v float64, n int, per map[string]float64, ok bool) {
	for _, g := range gs {
		switch {
		case g.histSum:
			if h, hs := rd.histogram(g.name, 1); h != nil {
				return h.Sum, 1, sums(hs), true
			}
		case g.over != "":
			used, n, _ := rd.sumSeries([]string{g.name})
			total, m, _ := rd.sumSeries([]string{g.over})
			if n > 0 && m > 0 && total > 0 {
				return used / total, 1, nil, true
			}
		case g.label != "":
			if v, n := rd.sumLabel(g.name, g.label); n > 0 {
				return v, n, nil, true
			}
		default:
			if v, n, per := rd.sumSeries([]string{g.name}); n > 0 {
				return v, n, per, true
			}
		}
	}
	return 0, 0, nil, false
}

// firstHist reads the first of hs found, and says which it was.
func (rd *reader) firstHist(hs []latency) (*Histogram, map[string]Histogram, latency) {
	for _, h := range hs {
		scale := cmp.Or(h.scale, 1)
		var out *Histogram
		var per map[string]Histogram
		if h.perRequest != "" {
			out, per = rd.counterMean(h.name, h.perRequest, scale)
		} else {
			out, per = rd.histogram(h.name, scale)
		}
		if out != nil {
			return out, per, h
		}
	}
	return nil, nil, latency{}
}

// sumLabel sums label's numeric values over name's series.
func (rd *reader) sumLabel(name, labelName string) (sum float64, n int) {
	for _, m := range rd.metrics(name) {
		if b, err := strconv.ParseFloat(label(m, labelName), 64); err == nil && b >= 0 && b <= maxGauge {
			sum += b
			n++
		}
	}
	return sum, n
}

// sums maps each histogram series to its sum (TGI's token counts).
func sums(per map[string]Histogram) map[string]float64 {
	out := make(map[string]float64, len(per))
	for k, h := range per {
		out[k] = h.Sum
	}
	return out
}

// seriesKey names one series: metric name and canonical labels.
func seriesKey(name, sig string) string { return name + "{" + sig + "}" }

// value is a sample's value whatever its declared type.
func value(m *dto.Metric) (float64, bool) {
	var v float64
	switch {
	case m.Gauge != nil:
		v = m.Gauge.GetValue()
	case m.Counter != nil:
		v = m.Counter.GetValue()
	case m.Untyped != nil:
		v = m.Untyped.GetValue()
	default:
		return 0, false
	}
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}

// sumSeries sums the finite values of the first family in names that has
// any; n is how many series were summed (0: none found), per each
// series' value by key.
func (rd *reader) sumSeries(names []string) (sum float64, n int, per map[string]float64) {
	for _, name := range names {
		per = map[string]float64{}
		for _, m := range rd.metrics(name) {
			if v, ok := value(m); ok && math.Abs(v) <= maxGauge {
				sum += v
				n++
				per[seriesKey(name, signature(m, ""))] = v
			}
		}
		if n > 0 && math.Abs(sum) <= maxGauge {
			return sum, n, per
		}
		sum, n = 0, 0
	}
	return 0, 0, nil
}

// maxGauge bounds the values kept, so that sums and means stay finite
// (JSON has no Inf); no real gauge or counter comes near it.
const maxGauge = 1e300

// histogram sums every usable series of histogram name (bounds and sum
// multiplied by scale), and returns each series by key too. It also reads
// a histogram exposed without a TYPE line, as separate name_bucket{le=…},
// name_count and name_sum series.
func (rd *reader) histogram(name string, scale float64) (*Histogram, map[string]Histogram) {
	var series []*histogramBuilder
	var keys []string
	if mf := rd.fams[name]; mf != nil && (mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_GAUGE_HISTOGRAM) {
		for _, m := range rd.metrics(name) {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			hb := &histogramBuilder{sum: h.GetSampleSum()}
			switch {
			case h.SampleCountFloat != nil:
				hb.count, hb.hasCnt = h.GetSampleCountFloat(), true
			case h.SampleCount != nil:
				hb.count, hb.hasCnt = float64(h.GetSampleCount()), true
			}
			for _, b := range h.GetBucket() {
				c := float64(b.GetCumulativeCount())
				if b.CumulativeCountFloat != nil {
					c = b.GetCumulativeCountFloat()
				}
				hb.bucket(b.GetUpperBound(), c)
			}
			series = append(series, hb)
			keys = append(keys, seriesKey(name, signature(m, "")))
		}
	} else if mf := rd.fams[name+"_bucket"]; mf != nil && mf.GetType() != dto.MetricType_HISTOGRAM {
		series, keys = rd.untypedHistogram(name)
	}
	var out *Histogram
	per := map[string]Histogram{}
	for i, hb := range series {
		h, ok := hb.build(name, scale)
		if !ok {
			continue
		}
		if prev, dup := per[keys[i]]; dup { // one label set twice: summed, as before
			*h = prev.Plus(*h)
		}
		per[keys[i]] = h.Clone()
		if out == nil {
			out = h
		} else {
			*out = out.Plus(*h)
		}
	}
	return out, per
}

// untypedHistogram groups name_bucket / name_count / name_sum series by
// their labels other than le.
func (rd *reader) untypedHistogram(name string) ([]*histogramBuilder, []string) {
	bySig := map[string]*histogramBuilder{}
	var order []string
	get := func(m *dto.Metric) *histogramBuilder {
		sig := signature(m, "le")
		hb := bySig[sig]
		if hb == nil {
			hb = &histogramBuilder{}
			bySig[sig] = hb
			order = append(order, sig)
		}
		return hb
	}
	for _, m := range rd.metrics(name + "_bucket") {
		v, ok := value(m)
		le, err := strconv.ParseFloat(label(m, "le"), 64)
		if !ok || err != nil {
			continue
		}
		get(m).bucket(le, v)
	}
	for _, m := range rd.metrics(name + "_count") {
		if v, ok := value(m); ok {
			if hb := bySig[signature(m, "le")]; hb != nil {
				hb.count, hb.hasCnt = v, true
			}
		}
	}
	for _, m := range rd.metrics(name + "_sum") {
		if hb := bySig[signature(m, "le")]; hb != nil {
			hb.sum, _ = value(m)
		}
	}
	out := make([]*histogramBuilder, 0, len(order))
	keys := make([]string, 0, len(order))
	for _, sig := range order {
		out = append(out, bySig[sig])
		keys = append(keys, seriesKey(name, sig))
	}
	return out, keys
}

// counterMean builds a mean-only histogram, per series, from a cumulative
// latency total (name, in units of scale seconds) and the request counts of
// perRequest's series with the same labels.
func (rd *reader) counterMean(name, perRequest string, scale float64) (*Histogram, map[string]Histogram) {
	requests := map[string]float64{}
	for _, m := range rd.metrics(perRequest) {
		if v, ok := value(m); ok {
			requests[signature(m, "")] += v
		}
	}
	var out *Histogram
	per := map[string]Histogram{}
	for _, m := range rd.metrics(name) {
		total, ok := value(m)
		sig := signature(m, "")
		n, has := requests[sig]
		if !ok || !has {
			continue
		}
		hb := &histogramBuilder{sum: total, count: n, hasCnt: true}
		h, good := hb.build(name, scale)
		if !good {
			continue
		}
		per[seriesKey(name, sig)] = h.Clone()
		out = addHist(out, h)
	}
	return out, per
}

func label(m *dto.Metric, name string) string {
	v, _ := labelOK(m, name)
	return v
}

// labelOK is label, and whether m has the label at all.
func labelOK(m *dto.Metric, name string) (string, bool) {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue(), true
		}
	}
	return "", false
}

// signature is a canonical form of m's labels other than skip.
func signature(m *dto.Metric, skip string) string {
	var parts []string
	for _, lp := range m.GetLabel() {
		if lp.GetName() != skip {
			parts = append(parts, lp.GetName()+"\xff"+lp.GetValue())
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "\xfe")
}

func clamp01(v float64) float64 { return max(0, min(1, v)) }
