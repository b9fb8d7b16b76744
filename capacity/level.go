package capacity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Level is one load level: an open-loop rate or a closed-loop concurrency.
type Level struct {
	Rate        float64 // requests per second (open loop)
	Concurrency int     // requests in flight (closed loop)
}

// Closed reports whether the level is a concurrency.
func (l Level) Closed() bool { return l.Concurrency > 0 }

// Value is the level as a number: the rate or the concurrency.
func (l Level) Value() float64 {
	if l.Closed() {
		return float64(l.Concurrency)
	}
	return l.Rate
}

// Name is the level's directory and stage name: "c16" or "r12.5".
func (l Level) Name() string {
	if l.Closed() {
		return "c" + strconv.Itoa(l.Concurrency)
	}
	return "r" + strconv.FormatFloat(l.Rate, 'f', -1, 64)
}

func (l Level) String() string {
	if l.Closed() {
		return fmt.Sprintf("%d concurrent", l.Concurrency)
	}
	return fmt.Sprintf("%g req/s", l.Rate)
}

// ParseLevel reads "12.5" (a rate) or "c16" (a concurrency).
func ParseLevel(s string) (Level, error) {
	s = strings.TrimSpace(s)
	if c, ok := strings.CutPrefix(s, "c"); ok {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return Level{}, fmt.Errorf("level %q: a concurrency is c followed by a whole number ≥ 1 (c16)", s)
		}
		return Level{Concurrency: n}, nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || !(r > 0) || math.IsInf(r, 0) {
		return Level{}, fmt.Errorf("level %q: a rate is a positive number of requests per second (12.5), a concurrency cN (c16)", s)
	}
	// Rates are kept to 4 significant digits, so names stay short.
	return Level{Rate: round4(r)}, nil
}

// ParseLevels reads a comma-separated list of levels, all rates or all
// concurrencies, and returns them in ascending order without repeats.
func ParseLevels(s string) ([]Level, error) {
	var out []Level
	for _, part := range strings.Split(s, ",") {
		l, err := ParseLevel(part)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && out[0].Closed() != l.Closed() {
			return nil, fmt.Errorf("levels %q: mix rates and concurrencies; give one kind", s)
		}
		out = append(out, l)
	}
	sortLevels(out)
	dedup := out[:0]
	for i, l := range out {
		if i == 0 || l.Value() != out[i-1].Value() {
			dedup = append(dedup, l)
		}
	}
	return dedup, nil
}

func sortLevels(ls []Level) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].Value() < ls[j-1].Value(); j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

// round4 keeps 4 significant digits.
func round4(v float64) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}
