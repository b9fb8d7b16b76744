package llmd

import (
	"errors"
	"math"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

// interval is one interval of latency.hlog that held completions: the
// request-rate series' points, which the token-rate series share.
type interval struct {
	from, to time.Time
}

// recordFacts is what the run's records add to the report: every counted
// request's token lengths, and each one's end on the wall clock.
type recordFacts struct {
	in, out []float64
	ends    []time.Time
}

// readRecords reads dir's records as summary s counted them: successful
// requests outside the warm-up. nil when the run kept no records, or when
// they do not add up to s (a torn file, a different run), since figures
// that disagree with summary.json's would be a second measurement.
func readRecords(dir results.Dir, s *results.Summary) (*recordFacts, error) {
	started, err := time.Parse(time.RFC3339Nano, s.Run.Started)
	if err != nil {
		return nil, nil
	}
	var f recordFacts
	var inSum, outSum int64
	_, err = results.ReadRecords(dir.RecordsPath(), func(r *loadgen.Record) error {
		if r.Warmup || !r.OK() {
			return nil
		}
		f.in = append(f.in, float64(r.InputTokens))
		f.out = append(f.out, float64(r.OutputTokens))
		f.ends = append(f.ends, started.Add(r.End))
		inSum += int64(r.InputTokens)
		outSum += int64(r.OutputTokens)
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if int64(len(f.out)) != s.Requests.OK || inSum != s.Tokens.Input || outSum != s.Tokens.Output {
		return nil, nil
	}
	return &f, nil
}

// lengthStats is the distribution of vs (token counts per request) in
// units count: exact order statistics, nearest rank, as the records hold
// every value.
func lengthStats(vs []float64) *Statistics {
	if len(vs) == 0 {
		return nil
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	q := func(p float64) *float64 {
		v := s[max(int(math.Ceil(p*float64(len(s))))-1, 0)]
		return &v
	}
	var ss float64
	mean := sum / float64(len(s))
	for _, v := range s {
		ss += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(ss / float64(len(s)))
	return &Statistics{Units: "count", Mean: mean, StdDev: &sd, Min: q(0), P50: q(0.5), P90: q(0.9), P95: q(0.95),
		P99: q(0.99), P99p9: q(0.999), Max: &s[len(s)-1]}
}

// tokenSeries is, per interval, the tokens vs of the requests that ended
// in it over the interval's length (tokens/s). Intervals are in time
// order, so each end finds its interval by binary search.
func tokenSeries(iv []interval, ends []time.Time, vs []float64) *Series {
	if len(iv) == 0 {
		return nil
	}
	sums := make([]float64, len(iv))
	for i, e := range ends {
		k := sort.Search(len(iv), func(k int) bool { return e.Before(iv[k].to) })
		if k < len(iv) && !e.Before(iv[k].from) {
			sums[k] += vs[i]
		}
	}
	se := &Series{Units: "tokens/s"}
	for k, in := range iv {
		v := sums[k] / in.to.Sub(in.from).Seconds()
		se.Series = append(se.Series, Point{TS: in.from.UTC().Format(time.RFC3339Nano), Value: &v})
	}
	return se
}

// addRecords writes what the records tell into r: the input and output
// length distributions beyond the mean, and the token-rate time series
// over latency.hlog's intervals. A length no request counted stays
// absent, as in FromSummary.
func addRecords(r *Report, f *recordFacts, s *results.Summary, iv []interval) {
	if f == nil {
		return
	}
	req := &r.Results.RequestPerformance.Aggregate.Requests
	// No prompt is empty, so a request without an input count had none
	// reported: its zero is not a length, and the input keeps its mean.
	inCounted, outCounted := s.Tokens.Input > 0 && !slices.Contains(f.in, 0), s.Tokens.Output > 0
	if inCounted {
		req.InputLength = lengthStats(f.in)
	}
	if outCounted {
		req.OutputLength = lengthStats(f.out)
	}
	ts := r.Results.RequestPerformance.TimeSeries
	if ts == nil || ts.Throughput == nil || !outCounted {
		return
	}
	th := ts.Throughput
	th.OutputTokenRate = tokenSeries(iv, f.ends, f.out)
	if inCounted {
		th.InputTokenRate = tokenSeries(iv, f.ends, f.in)
		tot := make([]float64, len(f.in))
		for i := range tot {
			tot[i] = f.in[i] + f.out[i]
		}
		th.TotalTokenRate = tokenSeries(iv, f.ends, tot)
	}
}
