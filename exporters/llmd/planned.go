package llmd

import (
	"encoding/json"
	"math"

	"github.com/tailgate-llm/tailgate/prompts"
)

// plannedSeqLen is the sequence length the mix planned, from summary.json's
// planned_lengths: pick is the class's input or output plan. nil when a
// class that sends requests has no plan for it (its data sets the
// length), since a part of the mix would then be missing.
//
// One distribution for every class maps to its word: fixed, uniform
// (value the midpoint), normal as gaussian; lognormal, which the published
// enum lacks, as other with its mean and standard deviation. Classes of
// different distributions make a mixture, no one standard distribution:
// other, value the share-weighted mean of the classes' means, min and max
// the widest bounds when every class states its own.
func plannedSeqLen(lp *prompts.LengthPlan, pick func(prompts.ClassLengths) *prompts.LengthDist) *SequenceLength {
	if lp == nil {
		return nil
	}
	var ds []*prompts.LengthDist
	var shares []float64
	for _, c := range lp.Classes {
		if c.Share <= 0 {
			continue
		}
		d := pick(c)
		if d == nil {
			return nil
		}
		ds, shares = append(ds, d), append(shares, c.Share)
	}
	if len(ds) == 0 {
		return nil
	}
	same := true
	first, _ := json.Marshal(ds[0])
	for _, d := range ds[1:] {
		if b, _ := json.Marshal(d); string(b) != string(first) {
			same = false
		}
	}
	if same {
		return oneSeqLen(ds[0])
	}
	sl := &SequenceLength{Distribution: "other"}
	var lo, hi int64
	bounded := true
	for i, d := range ds {
		sl.Value += shares[i] * meanOf(d)
		l, h, ok := boundsOf(d)
		if !ok {
			bounded = false
			continue
		}
		if i == 0 || l < lo {
			lo = l
		}
		if i == 0 || h > hi {
			hi = h
		}
	}
	if bounded {
		sl.Min, sl.Max = &lo, &hi
	}
	return sl
}

// oneSeqLen is one class distribution in the report's words.
func oneSeqLen(d *prompts.LengthDist) *SequenceLength {
	sl := &SequenceLength{Value: meanOf(d)}
	switch d.Dist {
	case prompts.DistFixed:
		sl.Distribution = "fixed"
	case prompts.DistUniform:
		sl.Distribution = "uniform"
	case prompts.DistNormal:
		sl.Distribution = "gaussian"
	default:
		sl.Distribution = "other"
	}
	sl.StdDev = d.StdDev
	if d.Dist != prompts.DistFixed {
		sl.Min, sl.Max = whole(d.Min), whole(d.Max)
	}
	return sl
}

// meanOf is a class distribution's planned mean: the value, the midpoint
// of a uniform range, the stated mean of a normal or lognormal (before its
// bounds truncate it).
func meanOf(d *prompts.LengthDist) float64 {
	switch {
	case d.Value != nil:
		return *d.Value
	case d.Mean != nil:
		return *d.Mean
	case d.Min != nil && d.Max != nil:
		return (*d.Min + *d.Max) / 2
	}
	return 0
}

// boundsOf is the least and most tokens a class distribution draws; not
// ok when the mix left a bound at tailgate's defaults.
func boundsOf(d *prompts.LengthDist) (lo, hi int64, ok bool) {
	if d.Value != nil {
		v := int64(math.Round(*d.Value))
		return v, v, true
	}
	if d.Min == nil || d.Max == nil {
		return 0, 0, false
	}
	return int64(math.Round(*d.Min)), int64(math.Round(*d.Max)), true
}

func whole(v *float64) *int64 {
	if v == nil {
		return nil
	}
	n := int64(math.Round(*v))
	return &n
}
