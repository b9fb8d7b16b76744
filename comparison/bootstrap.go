package comparison

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
)

// population is one side's samples of one metric, grouped by request, as
// ranks into its sorted distinct values so a resample needs no sort.
type population struct {
	values []float64 // distinct sample values, ms, ascending
	reqs   [][]int32 // per request: pairs of (rank, weight)
	total  int64     // sum of weights
}

func newPopulation(recs []loadgen.Record, m *measure.LatencyMetric) *population {
	type sample struct {
		v float64
		w int
	}
	var per [][]sample
	var all []float64
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			continue
		}
		var ss []sample
		for s := m.Samples(r); s.Next(); {
			v := float64(s.Value()) / 1e6
			ss = append(ss, sample{v, s.Weight()})
			all = append(all, v)
		}
		if len(ss) > 0 {
			per = append(per, ss)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	p := &population{values: all}
	for _, ss := range per {
		pairs := make([]int32, 0, 2*len(ss))
		for _, s := range ss {
			rank, _ := slices.BinarySearch(all, s.v)
			pairs = append(pairs, int32(rank), int32(s.w))
			p.total += int64(s.w)
		}
		p.reqs = append(p.reqs, pairs)
	}
	return p
}

// quantiles are the nearest-rank quantiles qs (0–1, ascending) of the
// requests picked (nil: all), counting into cnt (len(values), zeroed on
// return).
func (p *population) quantiles(qs []float64, pick []int, cnt []int64, out []float64) {
	var total int64
	add := func(pairs []int32) {
		for i := 0; i < len(pairs); i += 2 {
			cnt[pairs[i]] += int64(pairs[i+1])
			total += int64(pairs[i+1])
		}
	}
	if pick == nil {
		for _, r := range p.reqs {
			add(r)
		}
	} else {
		for _, i := range pick {
			add(p.reqs[i])
		}
	}
	j := 0
	var cum int64
	for rank, c := range cnt {
		cum += c
		for j < len(qs) && float64(cum) >= math.Ceil(qs[j]*float64(total)-1e-9) && cum > 0 {
			out[j] = p.values[rank]
			j++
		}
		cnt[rank] = 0
	}
	for ; j < len(qs); j++ {
		out[j] = math.NaN()
	}
}

// resample returns b bootstrap replicates of the quantiles qs:
// out[i][j] is replicate i's quantile qs[j].
func (p *population) resample(qs []float64, b int, rng *rand.Rand) [][]float64 {
	cnt := make([]int64, len(p.values))
	pick := make([]int, len(p.reqs))
	out := make([][]float64, b)
	for i := range out {
		for k := range pick {
			pick[k] = rng.IntN(len(p.reqs))
		}
		out[i] = make([]float64, len(qs))
		p.quantiles(qs, pick, cnt, out[i])
	}
	return out
}

// percentile is the nearest-rank percentile q (0–1) of sorted v.
func percentile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(v)))) - 1
	return v[min(max(i, 0), len(v)-1)]
}
