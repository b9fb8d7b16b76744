package kserve

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// KServe v2 data types the client sends or reads.
const (
	TypeBytes  = "BYTES"
	TypeBool   = "BOOL"
	TypeInt32  = "INT32"
	TypeInt64  = "INT64"
	TypeUint32 = "UINT32"
	TypeUint64 = "UINT64"
	TypeFP32   = "FP32"
	TypeFP64   = "FP64"
)

// AppendBytesElement appends one BYTES element in the raw encoding: a
// 4-byte little-endian length, then the bytes.
func AppendBytesElement(b []byte, elem []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(elem)))
	return append(b, elem...)
}

// errBytesTensor is a raw BYTES tensor whose length prefixes do not add up.
var errBytesTensor = errors.New("raw BYTES tensor: an element's 4-byte length runs past the end")

// EachBytesElement calls f with each element of a raw BYTES tensor, in
// order, without copying. It fails, having called f for the elements
// before, when a length prefix is cut short or runs past the end.
func EachBytesElement(raw []byte, f func(elem []byte)) error {
	for len(raw) > 0 {
		if len(raw) < 4 {
			return errBytesTensor
		}
		n := binary.LittleEndian.Uint32(raw)
		raw = raw[4:]
		if uint64(n) > uint64(len(raw)) {
			return errBytesTensor
		}
		f(raw[:n])
		raw = raw[n:]
	}
	return nil
}

// shapeFor is the shape to send for a tensor of one element: the model's
// declared shape with every variable (-1) dimension 1, so a TensorRT-LLM
// ensemble's batch dimension ([-1, 1]) gets [1, 1] and the vLLM backend's
// [1] stays [1]. Without a declaration it is [1].
func shapeFor(declared []int64) []int64 {
	if len(declared) == 0 {
		return []int64{1}
	}
	s := make([]int64, len(declared))
	for i, d := range declared {
		s[i] = d
		if d < 1 {
			s[i] = 1
		}
	}
	return s
}

// encodeScalar encodes v as one element of datatype dt, raw.
func encodeScalar(dt string, v any) ([]byte, error) {
	switch dt {
	case TypeBytes:
		switch x := v.(type) {
		case string:
			return AppendBytesElement(nil, []byte(x)), nil
		case []byte:
			return AppendBytesElement(nil, x), nil
		}
		return nil, fmt.Errorf("want a string for %s, got %T", dt, v)
	case TypeBool:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want true or false for %s, got %T", dt, v)
		}
		if b {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case TypeFP32, TypeFP64:
		f, ok := toFloat(v)
		if !ok {
			return nil, fmt.Errorf("want a number for %s, got %T", dt, v)
		}
		if dt == TypeFP32 {
			return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)), nil
	case TypeInt32, TypeInt64, TypeUint32, TypeUint64:
		f, ok := toFloat(v)
		if !ok || f != math.Trunc(f) {
			return nil, fmt.Errorf("want a whole number for %s, got %v", dt, v)
		}
		switch dt {
		case TypeInt32:
			if f < math.MinInt32 || f > math.MaxInt32 {
				return nil, fmt.Errorf("%v out of range for %s", v, dt)
			}
			return binary.LittleEndian.AppendUint32(nil, uint32(int32(f))), nil
		case TypeUint32:
			if f < 0 || f > math.MaxUint32 {
				return nil, fmt.Errorf("%v out of range for %s", v, dt)
			}
			return binary.LittleEndian.AppendUint32(nil, uint32(f)), nil
		case TypeUint64:
			if f < 0 {
				return nil, fmt.Errorf("%v out of range for %s", v, dt)
			}
			return binary.LittleEndian.AppendUint64(nil, uint64(f)), nil
		}
		return binary.LittleEndian.AppendUint64(nil, uint64(int64(f))), nil
	}
	return nil, fmt.Errorf("data type %q not supported for a parameter", dt)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	case interface{ Float64() (float64, error) }: // json.Number
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// outputTensor is one output of a response: raw bytes, or typed contents.
type outputTensor struct {
	name, datatype []byte
	raw            []byte
	contents       *pb.InferTensorContents
	hasRaw         bool
}

func errRawCount(outs, raws int) error {
	return fmt.Errorf("response has %d outputs but %d raw contents", outs, raws)
}

// appendText appends every element of a BYTES output to b.
func (o *outputTensor) appendText(b []byte) ([]byte, error) {
	if len(o.datatype) > 0 && string(o.datatype) != TypeBytes {
		return b, fmt.Errorf("output %q is %s, want BYTES", o.name, o.datatype)
	}
	if o.hasRaw {
		err := EachBytesElement(o.raw, func(e []byte) { b = append(b, e...) })
		if err != nil {
			return b, fmt.Errorf("output %q: %w", o.name, err)
		}
		return b, nil
	}
	for _, e := range o.contents.GetBytesContents() {
		b = append(b, e...)
	}
	return b, nil
}

// sum adds the elements of an integer output (token counts).
func (o *outputTensor) sum() (int64, error) {
	var n int64
	if o.hasRaw {
		size := 4
		switch string(o.datatype) {
		case TypeInt32, TypeUint32:
		case TypeInt64, TypeUint64:
			size = 8
		default:
			return 0, fmt.Errorf("output %q is %s, want an integer type", o.name, o.datatype)
		}
		if len(o.raw)%size != 0 {
			return 0, fmt.Errorf("output %q: %d raw bytes is not a whole number of %s", o.name, len(o.raw), o.datatype)
		}
		for b := o.raw; len(b) > 0; b = b[size:] {
			switch string(o.datatype) {
			case TypeInt32:
				n += int64(int32(binary.LittleEndian.Uint32(b)))
			case TypeUint32:
				n += int64(binary.LittleEndian.Uint32(b))
			default:
				n += int64(binary.LittleEndian.Uint64(b))
			}
		}
		return n, nil
	}
	c := o.contents
	for _, v := range c.GetIntContents() {
		n += int64(v)
	}
	for _, v := range c.GetUintContents() {
		n += int64(v)
	}
	for _, v := range c.GetInt64Contents() {
		n += v
	}
	for _, v := range c.GetUint64Contents() {
		n += int64(v)
	}
	return n, nil
}
