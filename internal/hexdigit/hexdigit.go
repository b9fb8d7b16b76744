// Package hexdigit reads one hexadecimal digit: what HTTP chunk sizes and
// JSON \u escapes are written in, decoded by hand on hot paths where
// strconv's string conversion would cost an allocation.
package hexdigit

// Value is c's value as a hexadecimal digit (either case), and whether it
// is one.
func Value(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
