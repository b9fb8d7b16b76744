package yamlwalk

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration is the one duration dialect of tailgate's files: Go
// durations ("500ms", "1.5s", "250us", "1h30m") and whole days or weeks
// ("30d", "4w", for SLO windows). Negative values are refused: no field
// takes one.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("%q is not a duration (want e.g. 150ms, 2s, 5m, 30d)", s)
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseUint(n, 10, 32)
			if err != nil || v > uint64(math.MaxInt64/int64(u.unit)) {
				return 0, bad
			}
			return time.Duration(v) * u.unit, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, bad
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}
