package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain skips the package with -short (make test-short): every test
// here is end to end, timed against real streams.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped with -short (end-to-end timing tests)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
