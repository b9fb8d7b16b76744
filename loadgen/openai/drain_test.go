package openai

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// discard drops exactly what io.CopyN to io.Discard would: n bytes at
// most, fewer when the reader ends first, and not a byte past n.
func TestDiscard(t *testing.T) {
	for _, c := range []struct{ size, n int }{{100000, 20000}, {100, 20000}, {8 << 10, 8 << 10}, {0, 10}, {10, 0}} {
		r := bytes.NewReader(make([]byte, c.size))
		discard(r, int64(c.n))
		want := bytes.NewReader(make([]byte, c.size))
		_, _ = io.CopyN(io.Discard, want, int64(c.n))
		if r.Len() != want.Len() {
			t.Errorf("%d bytes, n %d: %d left, io.CopyN leaves %d", c.size, c.n, r.Len(), want.Len())
		}
	}
	// A read error ends it (a loop that kept reading would never return).
	discard(io.MultiReader(strings.NewReader("ab"), errReader{}), 100)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
