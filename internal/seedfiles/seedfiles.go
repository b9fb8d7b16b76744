// Package seedfiles reads a test's seed files: the captured stream bodies
// that the SSE and OpenAI tests replay and fuzz from.
package seedfiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read returns every file in dir whose name ends in suffix, in name order;
// a directory that cannot be read fails tb.
func Read(tb testing.TB, dir, suffix string) [][]byte {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
