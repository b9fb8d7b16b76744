package schema

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"math"
	"sync"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// EncodeHistogram is h's V2 compressed encoding, base64 — what
// h.Encode(hdrhistogram.V2CompressedEncodingCookieBase) returns, byte for
// byte (TestEncodeHistogramAsTheLibrary) — with one compressor kept for
// reuse: the library makes a new zlib writer per histogram, a large
// allocation each, and tailgate encodes one per metric each second
// (latency.hlog) and each at the end (histograms.json). With thousands of
// streams in flight that allocation would be a large share of the run's,
// and the collector's mark phases that come with it delay the sends
// (BenchmarkEncodeHistogram).
func EncodeHistogram(h *hdrhistogram.Histogram) ([]byte, error) {
	encoder.Lock()
	defer encoder.Unlock()
	return encoder.encode(h)
}

// V2 encoding cookies (hdrhistogram's, with the word size 0x10 set).
const (
	v2EncodingCookie           = hdrhistogram.V2EncodingCookieBase | 0x10
	v2CompressedEncodingCookie = hdrhistogram.V2CompressedEncodingCookieBase | 0x10
)

type histEncoder struct {
	raw, zbuf bytes.Buffer
	zw        *zlib.Writer
}

// encoder is the one encoder, kept for the process (a sync.Pool would let
// each collection drop its compressor); encodes are few and short.
var encoder struct {
	sync.Mutex
	histEncoder
}

func (e *histEncoder) encode(h *hdrhistogram.Histogram) ([]byte, error) {
	s := h.Export()
	// Counts up to the highest one recorded, zero runs as one negative
	// count, each as a ZigZag LEB128 varint (the library's "64b9B" form).
	limit := len(s.Counts)
	for limit > 1 && s.Counts[limit-1] == 0 {
		limit--
	}
	e.raw.Reset()
	var head [40]byte
	e.raw.Write(head[:])
	for i := 0; i < limit; {
		c := s.Counts[i]
		i++
		if c == 0 {
			zeros := int64(1)
			for i < limit && s.Counts[i] == 0 {
				zeros++
				i++
			}
			if zeros > 1 {
				c = -zeros
			}
		}
		appendZigZag(&e.raw, c)
	}
	raw := e.raw.Bytes()
	ratio := s.IntegerToDoubleConversionRatio
	if ratio == 0 {
		ratio = 1
	}
	binary.BigEndian.PutUint32(raw[0:], uint32(v2EncodingCookie))
	binary.BigEndian.PutUint32(raw[4:], uint32(len(raw)-40))
	binary.BigEndian.PutUint32(raw[8:], 0) // normalizing index offset: counts are not rotated
	binary.BigEndian.PutUint32(raw[12:], uint32(s.SignificantFigures))
	binary.BigEndian.PutUint64(raw[16:], uint64(s.LowestTrackableValue))
	binary.BigEndian.PutUint64(raw[24:], uint64(s.HighestTrackableValue))
	binary.BigEndian.PutUint64(raw[32:], math.Float64bits(ratio))

	e.zbuf.Reset()
	var out [8]byte
	e.zbuf.Write(out[:]) // cookie and compressed length, filled in below
	if e.zw == nil {
		zw, err := zlib.NewWriterLevel(&e.zbuf, zlib.BestCompression)
		if err != nil {
			return nil, err
		}
		e.zw = zw
	} else {
		e.zw.Reset(&e.zbuf)
	}
	if _, err := e.zw.Write(raw); err != nil {
		return nil, err
	}
	if err := e.zw.Close(); err != nil {
		return nil, err
	}
	z := e.zbuf.Bytes()
	binary.BigEndian.PutUint32(z[0:], uint32(v2CompressedEncodingCookie))
	binary.BigEndian.PutUint32(z[4:], uint32(len(z)-8))
	b := make([]byte, base64.StdEncoding.EncodedLen(len(z)))
	base64.StdEncoding.Encode(b, z)
	return b, nil
}

// appendZigZag appends v as a ZigZag LEB128 varint of at most 9 bytes,
// the ninth holding 8 bits.
func appendZigZag(b *bytes.Buffer, v int64) {
	u := uint64(v<<1) ^ uint64(v>>63)
	for i := 0; i < 8; i++ {
		if u>>7 == 0 {
			b.WriteByte(byte(u))
			return
		}
		b.WriteByte(byte(u&0x7f | 0x80))
		u >>= 7
	}
	b.WriteByte(byte(u))
}
