// Package theater flags "metric theater": time when the GPUs look busy
// (high average utilisation) while the users' wait grows (the server's
// queue delay, or the TTFT p99 of the interactive classes). A busy-ness
// chart alone reads that as a well-used fleet; it is a queue building up.
//
// # Rule
//
// Time is cut into buckets (default 10 s, from the run's start). A bucket
// is flagged when its mean GPU utilisation is at least Threshold (default
// 80%) and, against the bucket before it, the mean queue delay grew by at
// least 25% and 10 ms, or the TTFT tail of the interactive classes grew by
// at least 25% and 20 ms. The absolute floors keep a quiet run's
// bucket-to-bucket jitter from flagging; the relative ones a slow but
// steady one. The tail is the p99 when a bucket holds at least 1000
// requests (10 beyond it), else the quantile with 10 requests beyond it
// (the median at least): a p99 of 80 requests is their slowest one, and
// one slow request on a noisy client flagged a run at a third of capacity. Without GPU utilisation nothing is flagged, and the section
// says so.
package theater

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Options set the rule.
type Options struct {
	// Bucket is the bucket width (default 10 s).
	Bucket time.Duration
	// Threshold is the utilisation (0–1) that counts as busy (default 0.8).
	Threshold float64
	// Interactive names the classes whose TTFT counts; empty: every class.
	Interactive []string
}

// Rule is the rule in words, written beside the buckets.
const Rule = "a bucket is flagged when its mean GPU utilisation is at least the threshold while, against the bucket before, " +
	"the mean server queue delay grew by >= 25% and >= 10 ms or the interactive classes' TTFT tail (p99, or with fewer than 1000 requests the quantile with 10 beyond it) grew by >= 25% and >= 20 ms"

// Section is summary.json's "capacity" section.
type Section struct {
	Rule        string   `json:"rule"`
	Threshold   float64  `json:"gpu_utilization_threshold"`
	BucketS     float64  `json:"bucket_s"`
	Interactive []string `json:"interactive_classes,omitempty"`
	// MetricTheater is set when any bucket is flagged.
	MetricTheater bool     `json:"metric_theater"`
	Flagged       int      `json:"flagged_buckets"`
	Buckets       []Bucket `json:"buckets"`
	// Note says why nothing could be flagged, when so.
	Note string `json:"note,omitempty"`
}

// Bucket is one time bucket.
type Bucket struct {
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	// GPUUtilization is the mean over the samples in the bucket (0–1).
	GPUUtilization *float64 `json:"gpu_utilization,omitempty"`
	// QueueDelayMs is the mean server queue delay of requests admitted in
	// the bucket.
	QueueDelayMs *float64 `json:"queue_delay_ms,omitempty"`
	// TTFTTailMs is the interactive classes' TTFT at TTFTTailQuantile
	// (0–1), by intended start: the p99 from 1000 requests, else the
	// quantile with 10 requests beyond it (see the package doc).
	TTFTTailMs       *float64 `json:"ttft_tail_ms,omitempty"`
	TTFTTailQuantile float64  `json:"ttft_tail_quantile,omitempty"`
	Requests         int      `json:"requests"`
	Flag             bool     `json:"flag"`
	Why              string   `json:"why,omitempty"`
}

// Detector collects samples and requests as they come; it is safe for
// concurrent use (the telemetry sampler and the record loop feed it).
type Detector struct {
	mu          sync.Mutex
	opt         Options
	interactive map[string]bool
	gpu         []acc
	queue       []acc
	ttft        [][]float32
	hasGPU      bool
}

type acc struct {
	sum, weight float64
}

// New returns a detector.
func New(opt Options) *Detector {
	if opt.Bucket <= 0 {
		opt.Bucket = 10 * time.Second
	}
	if opt.Threshold <= 0 {
		opt.Threshold = 0.8
	}
	d := &Detector{opt: opt}
	if len(opt.Interactive) > 0 {
		d.interactive = map[string]bool{}
		for _, c := range opt.Interactive {
			d.interactive[c] = true
		}
	}
	return d
}

func (d *Detector) idx(t time.Duration) int {
	if t < 0 {
		return -1
	}
	return int(t / d.opt.Bucket)
}

func grow[T any](s []T, i int) []T {
	for len(s) <= i {
		var z T
		s = append(s, z)
	}
	return s
}

// GPU adds a utilisation sample (0–1) taken at t since the run's start.
func (d *Detector) GPU(t time.Duration, util float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := d.idx(t)
	if i < 0 || math.IsNaN(util) {
		return
	}
	d.gpu = grow(d.gpu, i)
	d.gpu[i].sum += util
	d.gpu[i].weight++
	d.hasGPU = true
}

// Queue adds the server's queue delay: n requests admitted around t with
// a mean wait of meanMs.
func (d *Detector) Queue(t time.Duration, meanMs float64, n float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := d.idx(t)
	if i < 0 || n <= 0 {
		return
	}
	d.queue = grow(d.queue, i)
	d.queue[i].sum += meanMs * n
	d.queue[i].weight += n
}

// Request adds a successful measured request's TTFT, by intended start.
func (d *Detector) Request(class string, intended, ttft time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.interactive != nil && !d.interactive[class] {
		return
	}
	i := d.idx(intended)
	if i < 0 {
		return
	}
	d.ttft = grow(d.ttft, i)
	d.ttft[i] = append(d.ttft[i], float32(ttft.Seconds()*1000))
}

// Section judges the buckets.
func (d *Detector) Section() *Section {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &Section{Rule: Rule, Threshold: d.opt.Threshold, BucketS: d.opt.Bucket.Seconds(), Interactive: d.opt.Interactive,
		Buckets: []Bucket{}}
	n := max(len(d.gpu), len(d.queue), len(d.ttft))
	for i := range n {
		b := Bucket{FromS: float64(i) * s.BucketS, ToS: float64(i+1) * s.BucketS}
		if i < len(d.gpu) && d.gpu[i].weight > 0 {
			b.GPUUtilization = new(d.gpu[i].sum / d.gpu[i].weight)
		}
		if i < len(d.queue) && d.queue[i].weight > 0 {
			b.QueueDelayMs = new(d.queue[i].sum / d.queue[i].weight)
		}
		if i < len(d.ttft) && len(d.ttft[i]) > 0 {
			v := slices.Clone(d.ttft[i])
			slices.Sort(v)
			b.Requests = len(v)
			q := tailQuantile(len(v))
			k := min(max(int(math.Ceil(q*float64(len(v))))-1, 0), len(v)-1)
			b.TTFTTailMs, b.TTFTTailQuantile = new(float64(v[k])), q
		}
		s.Buckets = append(s.Buckets, b)
	}
	if !d.hasGPU {
		s.Note = "no GPU utilisation was sampled: nothing to flag"
		return s
	}
	for i := 1; i < len(s.Buckets); i++ {
		b, prev := &s.Buckets[i], &s.Buckets[i-1]
		if b.GPUUtilization == nil || *b.GPUUtilization < d.opt.Threshold {
			continue
		}
		var why []string
		if grew(prev.QueueDelayMs, b.QueueDelayMs, 10) {
			why = append(why, fmt.Sprintf("queue delay %.0f → %.0f ms", *prev.QueueDelayMs, *b.QueueDelayMs))
		}
		if grew(prev.TTFTTailMs, b.TTFTTailMs, 20) {
			why = append(why, fmt.Sprintf("TTFT %s %.0f → %.0f ms", quantileName(b.TTFTTailQuantile), *prev.TTFTTailMs, *b.TTFTTailMs))
		}
		if len(why) > 0 {
			b.Flag = true
			b.Why = fmt.Sprintf("GPU %.0f%% busy while %s", 100**b.GPUUtilization, joinAnd(why))
			s.Flagged++
		}
	}
	s.MetricTheater = s.Flagged > 0
	return s
}

// tailQuantile is the TTFT quantile judged in a bucket of n requests: 0.99
// from 1000, else the one with 10 requests beyond it, the median at least.
func tailQuantile(n int) float64 {
	return max(0.5, min(0.99, 1-10/float64(n)))
}

// quantileName writes q as "p99", "p87.5".
func quantileName(q float64) string {
	return "p" + strconv.FormatFloat(math.Round(q*1000)/10, 'f', -1, 64)
}

// grew: b is at least 25% and floor ms above a.
func grew(a, b *float64, floor float64) bool {
	return a != nil && b != nil && *b >= 1.25**a && *b-*a >= floor
}

func joinAnd(s []string) string {
	if len(s) == 2 {
		return s[0] + " and " + s[1]
	}
	return s[0]
}

// Warning is the run's warning for a flagged section ("" when not).
func (s *Section) Warning() string {
	if s == nil || !s.MetricTheater {
		return ""
	}
	for _, b := range s.Buckets {
		if b.Flag {
			return fmt.Sprintf("metric theater: %d of %d buckets of %gs show the GPUs busy while users wait longer (first at %gs: %s); utilisation is not capacity",
				s.Flagged, len(s.Buckets), s.BucketS, b.FromS, b.Why)
		}
	}
	return ""
}

// Sample feeds a telemetry round: the mean utilisation over its GPUs and
// the queue delay of the requests admitted since prev (the server's
// cumulative queue histogram then and now). It returns the histogram to
// pass as prev next time.
func (d *Detector) Sample(at time.Duration, util []float64, queueSumS float64, queueCount uint64, prev *QueueMark) {
	if len(util) > 0 {
		sum := 0.0
		for _, u := range util {
			sum += u
		}
		d.GPU(at, sum/float64(len(util)))
	}
	if prev == nil {
		return
	}
	if prev.seen && queueCount > prev.count && queueSumS >= prev.sum {
		n := float64(queueCount - prev.count)
		d.Queue(at, 1000*(queueSumS-prev.sum)/n, n)
	}
	prev.seen, prev.sum, prev.count = true, queueSumS, queueCount
}

// QueueMark is the last queue histogram seen, for Sample.
type QueueMark struct {
	seen  bool
	sum   float64
	count uint64
}
