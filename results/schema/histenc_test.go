package schema

import (
	"bytes"
	"math/rand/v2"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The bounds of measure.NewHistogram: microseconds, 1 µs to 1 h.
const (
	histMinMicros = 1
	histMaxMicros = int64(3600 * 1000 * 1000)
)

func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(histMinMicros, histMaxMicros, 3) }

// histograms for the encoder tests: empty, one value, the bounds, and
// random latency-like populations of several sizes and spreads.
func testHistograms() []*hdrhistogram.Histogram {
	var out []*hdrhistogram.Histogram
	out = append(out, newHistogram())
	one := newHistogram()
	one.RecordValue(1234)
	out = append(out, one)
	edges := newHistogram()
	edges.RecordValue(histMinMicros)
	edges.RecordValues(histMaxMicros, 3)
	out = append(out, edges)
	big := newHistogram()
	big.RecordValues(50_000, 1<<40) // counts that need long varints
	out = append(out, big)
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 10, 1000, 100_000} {
		for _, spread := range []float64{1e3, 1e5, 1e8} {
			h := newHistogram()
			for range n {
				h.RecordValue(1 + int64(r.ExpFloat64()*spread))
			}
			h.SetTag("ttft")
			out = append(out, h)
		}
	}
	other := hdrhistogram.New(1, 1000, 2) // other bounds and precision
	other.RecordValue(17)
	out = append(out, other)
	return out
}

// TestEncodeHistogramAsTheLibrary: EncodeHistogram's bytes are the
// library's Encode's, and decode to the same histogram; the encoder,
// reused, keeps none of the last histogram.
func TestEncodeHistogramAsTheLibrary(t *testing.T) {
	t.Parallel()
	for i, h := range testHistograms() {
		want, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a new encoder, then a reused one
			got, err := EncodeHistogram(h)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("histogram %d (%d values, max %d): encoding differs from the library's:\n got  %.80s…\n want %.80s…", i, h.TotalCount(), h.Max(), got, want)
			}
		}
		back, err := hdrhistogram.Decode(want)
		if err != nil || back.TotalCount() != h.TotalCount() || back.Max() != h.Max() {
			t.Fatalf("histogram %d: decoded %v, count %d max %d", i, err, back.TotalCount(), back.Max())
		}
	}
}

// BenchmarkEncodeHistogram: the library's Encode beside EncodeHistogram
// (allocations per histogram are the point).
func BenchmarkEncodeHistogram(b *testing.B) {
	h := testHistograms()[10]
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
		}
	})
	b.Run("tailgate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			EncodeHistogram(h)
		}
	})
}
