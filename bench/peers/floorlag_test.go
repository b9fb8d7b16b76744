package main

import (
	"slices"
	"testing"
)

func TestParseFloorLag(t *testing.T) {
	lags, failed, err := parseFloorLag("120\n-3\n4500000\nfailed 2\n")
	if err != nil || failed != 2 || !slices.Equal(lags, []int64{120, -3, 4500000}) {
		t.Fatalf("got %v, %d, %v", lags, failed, err)
	}
	if _, p99, ok := meanP99(lags); !ok || p99 != 4.5 {
		t.Errorf("p99 %v ms, want 4.5", p99)
	}
	for _, bad := range []string{"", "120\n", "12x\nfailed 0\n", "failed x\n"} {
		if _, _, err := parseFloorLag(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
