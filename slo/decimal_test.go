package slo

import "testing"

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in    string
		num   uint64
		scale uint8
		str   string
	}{
		{"0.99", 99, 2, "0.99"}, {"99%", 99, 2, "99%"}, {"99.9%", 999, 3, "99.9%"}, {"100%", 1, 0, "100%"},
		{"50%", 5, 1, "50%"}, {"1200", 1200, 0, "1200"}, {"0.500", 5, 1, "0.5"}, {" 1 ", 1, 0, "1"},
		{"0", 0, 0, "0"}, {"0.0001%", 1, 6, "0.0001%"}, {".5", 5, 1, "0.5"}, {"007", 7, 0, "7"},
	} {
		d, err := ParseDecimal(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if d.Num != c.num || d.Scale != c.scale || d.String() != c.str {
			t.Errorf("%q = %d/10^%d %q, want %d/10^%d %q", c.in, d.Num, d.Scale, d.String(), c.num, c.scale, c.str)
		}
	}
	for _, bad := range []string{"", "%", ".", "-1", "1e3", "0x10", "1.2.3", "abc", "5O0", "1,5",
		"1234567890123456789", "0.0000000000000000001"} {
		if d, err := ParseDecimal(bad); err == nil {
			t.Errorf("%q parsed as %v", bad, d)
		}
	}
}

func TestDecimalCompareExact(t *testing.T) {
	t.Parallel()
	// 99.9/100 in float64 is 0.9990000000000001, above 999/1000: a float
	// comparison would fail 999 good of 1000 against 99.9%.
	d := MustDecimal("99.9%")
	if d.CmpRatio(999, 1000) != 0 || d.CmpRatio(998, 1000) != -1 || d.CmpRatio(1000, 1000) != 1 {
		t.Fatal("99.9% against 999/1000, 998/1000, 1000/1000")
	}
	if got := d.CeilMul(1000); got != 999 {
		t.Fatalf("ceil(99.9%% of 1000) = %d", got)
	}
	if got := d.CeilMul(1001); got != 1000 { // 999.999 → 1000
		t.Fatalf("ceil(99.9%% of 1001) = %d", got)
	}
	if got := MustDecimal("0.99").CeilMul(^uint64(0)); got == 0 {
		t.Fatal("overflow")
	}
}
