package slo

import (
	"errors"
	"math/big"
	"strconv"
	"strings"
)

// Decimal is a non-negative decimal number kept exactly as written:
// Num / 10^Scale. Targets ("99.9%") and thresholds ("0.5%", "1200") are
// Decimals so that boundaries compare in integers, never in binary floats.
type Decimal struct {
	Num   uint64
	Scale uint8 // ≤ maxScale
	// Percent records that the file wrote a percentage, for display only:
	// 99.9% is Num 999, Scale 3, Percent true.
	Percent bool
}

const (
	maxScale  = 18
	maxDigits = 18
)

var pow10 = func() [maxScale + 1]uint64 {
	var p [maxScale + 1]uint64
	p[0] = 1
	for i := 1; i <= maxScale; i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

var errDecimal = errors.New("not a decimal number")

// ParseDecimal reads "12", "0.995", "99.9%" (a percentage: /100). It takes
// no sign, exponent or separators, at most 18 digits.
func ParseDecimal(s string) (Decimal, error) {
	s = strings.TrimSpace(s)
	var d Decimal
	if t, ok := strings.CutSuffix(s, "%"); ok {
		d.Percent = true
		s = strings.TrimSpace(t)
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return Decimal{}, errDecimal
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return Decimal{}, errDecimal
		}
	}
	frac = strings.TrimRight(frac, "0")
	digits := strings.TrimLeft(intPart+frac, "0")
	if len(digits) > maxDigits {
		return Decimal{}, errors.New("too many digits")
	}
	scale := len(frac)
	if d.Percent {
		scale += 2
	}
	if scale > maxScale {
		return Decimal{}, errors.New("too many decimal places")
	}
	var n uint64
	if digits != "" {
		var err error
		if n, err = strconv.ParseUint(digits, 10, 64); err != nil {
			return Decimal{}, errDecimal
		}
	}
	for scale > 0 && n%10 == 0 {
		n /= 10
		scale--
	}
	d.Num, d.Scale = n, uint8(scale)
	return d, nil
}

// MustDecimal is ParseDecimal for constants; it panics on error.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic("slo: MustDecimal(" + strconv.Quote(s) + "): " + err.Error())
	}
	return d
}

// Float is the value as a float64 (for display and JSON).
func (d Decimal) Float() float64 {
	f, _ := strconv.ParseFloat(d.plain(), 64)
	return f
}

// complement is 1 − d for d ≤ 1, computed exactly and rounded once.
func (d Decimal) complement() float64 {
	den := pow10[d.Scale]
	if d.Num >= den {
		return 0
	}
	return float64(den-d.Num) / float64(den)
}

// IsZero reports whether the value is 0.
func (d Decimal) IsZero() bool { return d.Num == 0 }

// plain writes Num/10^Scale in positional notation.
func (d Decimal) plain() string { return shift(d.Num, int(d.Scale)) }

func shift(num uint64, scale int) string {
	s := strconv.FormatUint(num, 10)
	if scale <= 0 {
		return s + strings.Repeat("0", -scale)
	}
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	i, f := s[:len(s)-scale], strings.TrimRight(s[len(s)-scale:], "0")
	if f == "" {
		return i
	}
	return i + "." + f
}

// String writes the number the way the file did: "99.9%" or "0.999".
func (d Decimal) String() string {
	if d.Percent {
		return shift(d.Num, int(d.Scale)-2) + "%"
	}
	return d.plain()
}

// MarshalText writes String(), so JSON shows what the file said.
func (d Decimal) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads ParseDecimal's forms.
func (d *Decimal) UnmarshalText(b []byte) error {
	v, err := ParseDecimal(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// CmpRatio compares a/b with d: -1, 0 or +1. b must be > 0.
func (d Decimal) CmpRatio(a, b uint64) int {
	// a/b ? Num/10^Scale  ⇔  a·10^Scale ? Num·b
	var l, r big.Int
	l.SetUint64(a)
	l.Mul(&l, new(big.Int).SetUint64(pow10[d.Scale]))
	r.SetUint64(d.Num)
	r.Mul(&r, new(big.Int).SetUint64(b))
	return l.Cmp(&r)
}

// CeilMul is ⌈d · n⌉: the number of events out of n that a target fraction d
// requires.
func (d Decimal) CeilMul(n uint64) uint64 {
	var p big.Int
	p.SetUint64(d.Num)
	p.Mul(&p, new(big.Int).SetUint64(n))
	q, m := new(big.Int).QuoRem(&p, new(big.Int).SetUint64(pow10[d.Scale]), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsUint64() {
		return ^uint64(0)
	}
	return q.Uint64()
}
