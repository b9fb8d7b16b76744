package hexdigit

import (
	"strconv"
	"testing"
)

// Every byte agrees with strconv.ParseUint of it in base 16.
func TestValueAgreesWithStrconv(t *testing.T) {
	t.Parallel()
	for c := 0; c < 256; c++ {
		v, ok := Value(byte(c))
		want, err := strconv.ParseUint(string([]byte{byte(c)}), 16, 8)
		if ok != (err == nil) || (ok && uint64(v) != want) {
			t.Errorf("Value(%q) = %d, %v; strconv %d, %v", byte(c), v, ok, want, err)
		}
	}
}
