// Package gguf writes and reads GGUF files (version 3), the model format of
// llama.cpp and Ollama, so tests can serve a real server a model they made
// themselves: Tiny writes a random-weight llama small enough (under 1 MB)
// to generate in a test.
//
// Layout (little endian): "GGUF", version u32, tensor count u64, key count
// u64; each key as a string then a type u32 and its value; each tensor as
// name, dimension count u32, dimensions u64 (innermost first), ggml type
// u32 and data offset u64; padding to the alignment (32); tensor data, each
// tensor at an aligned offset.
package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
)

// Value types of metadata.
const (
	typeUint8   = 0
	typeInt8    = 1
	typeUint16  = 2
	typeInt16   = 3
	typeUint32  = 4
	typeInt32   = 5
	typeFloat32 = 6
	typeBool    = 7
	typeString  = 8
	typeArray   = 9
	typeUint64  = 10
	typeInt64   = 11
	typeFloat64 = 12
)

// TypeF32 is ggml's type number of 32-bit float tensors, the only one
// written and read here.
const TypeF32 = 0

// Alignment of tensor data (general.alignment's default).
const Alignment = 32

const version = 3

// KV is one metadata key. Value is one of uint32, int32, float32, bool,
// string, uint64, []string, []float32, []int32.
type KV struct {
	Key   string
	Value any
}

// Tensor is one F32 tensor; Dims are innermost first (ggml's ne), so a
// matrix of R rows of C values is {C, R}.
type Tensor struct {
	Name string
	Dims []uint64
	Data []float32
}

// File is a whole GGUF file.
type File struct {
	KV      []KV
	Tensors []Tensor
}

// Get returns the value of key, or nil.
func (f *File) Get(key string) any {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// Tensor returns the tensor named name, or nil.
func (f *File) Tensor(name string) *Tensor {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i]
		}
	}
	return nil
}

func elems(dims []uint64) uint64 {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

func pad(n uint64) uint64 { return (n + Alignment - 1) / Alignment * Alignment }

type writer struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (w *writer) bytes(b []byte) {
	if w.err != nil {
		return
	}
	var k int
	k, w.err = w.w.Write(b)
	w.n += uint64(k)
}

func (w *writer) u32(v uint32) { w.bytes(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *writer) u64(v uint64) { w.bytes(binary.LittleEndian.AppendUint64(nil, v)) }
func (w *writer) str(s string) { w.u64(uint64(len(s))); w.bytes([]byte(s)) }

func (w *writer) value(key string, v any) error {
	switch v := v.(type) {
	case uint32:
		w.u32(typeUint32)
		w.u32(v)
	case int32:
		w.u32(typeInt32)
		w.u32(uint32(v))
	case uint64:
		w.u32(typeUint64)
		w.u64(v)
	case float32:
		w.u32(typeFloat32)
		w.u32(math.Float32bits(v))
	case bool:
		w.u32(typeBool)
		b := byte(0)
		if v {
			b = 1
		}
		w.bytes([]byte{b})
	case string:
		w.u32(typeString)
		w.str(v)
	case []string:
		w.u32(typeArray)
		w.u32(typeString)
		w.u64(uint64(len(v)))
		for _, s := range v {
			w.str(s)
		}
	case []float32:
		w.u32(typeArray)
		w.u32(typeFloat32)
		w.u64(uint64(len(v)))
		for _, f := range v {
			w.u32(math.Float32bits(f))
		}
	case []int32:
		w.u32(typeArray)
		w.u32(typeInt32)
		w.u64(uint64(len(v)))
		for _, i := range v {
			w.u32(uint32(i))
		}
	default:
		return fmt.Errorf("gguf: key %s: cannot write a %T", key, v)
	}
	return nil
}

// Write writes f to out.
func Write(out io.Writer, f *File) error {
	w := &writer{w: bufio.NewWriterSize(out, 64<<10)}
	w.bytes([]byte("GGUF"))
	w.u32(version)
	w.u64(uint64(len(f.Tensors)))
	w.u64(uint64(len(f.KV)))
	for _, kv := range f.KV {
		w.str(kv.Key)
		if err := w.value(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	var off uint64
	for _, t := range f.Tensors {
		if uint64(len(t.Data)) != elems(t.Dims) {
			return fmt.Errorf("gguf: tensor %s: %d values for dimensions %v", t.Name, len(t.Data), t.Dims)
		}
		w.str(t.Name)
		w.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			w.u64(d)
		}
		w.u32(TypeF32)
		w.u64(off)
		off = pad(off + 4*uint64(len(t.Data)))
	}
	w.bytes(make([]byte, pad(w.n)-w.n))
	start := w.n
	for _, t := range f.Tensors {
		buf := make([]byte, 0, 4*len(t.Data))
		for _, v := range t.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		w.bytes(buf)
		w.bytes(make([]byte, pad(w.n-start)-(w.n-start)))
	}
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

type reader struct {
	r   io.Reader
	n   uint64
	err error
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > 1<<30 {
		r.err = fmt.Errorf("at byte %d: length %d too large", r.n, n)
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.err = fmt.Errorf("at byte %d: %w", r.n, err)
		return nil
	}
	r.n += n
	return b
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) str() string { return string(r.bytes(r.u64())) }

func (r *reader) scalar(typ uint32) any {
	switch typ {
	case typeUint8, typeInt8, typeBool:
		b := r.bytes(1)
		if b == nil {
			return nil
		}
		if typ == typeBool {
			return b[0] != 0
		}
		return uint32(b[0])
	case typeUint16, typeInt16:
		b := r.bytes(2)
		if b == nil {
			return nil
		}
		return uint32(binary.LittleEndian.Uint16(b))
	case typeUint32:
		return r.u32()
	case typeInt32:
		return int32(r.u32())
	case typeFloat32:
		return math.Float32frombits(r.u32())
	case typeString:
		return r.str()
	case typeUint64, typeInt64:
		return r.u64()
	case typeFloat64:
		return math.Float64frombits(r.u64())
	}
	r.err = fmt.Errorf("at byte %d: unknown value type %d", r.n, typ)
	return nil
}

func (r *reader) value() any {
	typ := r.u32()
	if typ != typeArray {
		return r.scalar(typ)
	}
	et, n := r.u32(), r.u64()
	if n > 1<<24 {
		r.err = fmt.Errorf("at byte %d: array of %d", r.n, n)
		return nil
	}
	switch et {
	case typeString:
		out := make([]string, 0, n)
		for range n {
			out = append(out, r.str())
		}
		return out
	case typeFloat32:
		out := make([]float32, 0, n)
		for range n {
			out = append(out, math.Float32frombits(r.u32()))
		}
		return out
	case typeInt32:
		out := make([]int32, 0, n)
		for range n {
			out = append(out, int32(r.u32()))
		}
		return out
	}
	out := make([]any, 0, n)
	for range n {
		out = append(out, r.scalar(et))
	}
	return out
}

// Read reads a whole GGUF file of F32 tensors.
func Read(in io.Reader) (*File, error) {
	r := &reader{r: bufio.NewReader(in)}
	if m := r.bytes(4); r.err == nil && string(m) != "GGUF" {
		return nil, fmt.Errorf("gguf: magic %q: not a GGUF file", m)
	}
	if v := r.u32(); r.err == nil && v != version {
		return nil, fmt.Errorf("gguf: version %d: want %d", v, version)
	}
	nt, nkv := r.u64(), r.u64()
	if r.err == nil && (nt > 1<<20 || nkv > 1<<20) {
		return nil, fmt.Errorf("gguf: %d tensors, %d keys: too many", nt, nkv)
	}
	f := &File{}
	for i := uint64(0); i < nkv && r.err == nil; i++ {
		k := r.str()
		f.KV = append(f.KV, KV{Key: k, Value: r.value()})
		if r.err != nil {
			r.err = fmt.Errorf("key %q: %w", k, r.err)
		}
	}
	offs := make([]uint64, 0, nt)
	for i := uint64(0); i < nt && r.err == nil; i++ {
		t := Tensor{Name: r.str()}
		nd := r.u32()
		if nd > 4 {
			return nil, fmt.Errorf("gguf: tensor %s: %d dimensions", t.Name, nd)
		}
		for range nd {
			t.Dims = append(t.Dims, r.u64())
		}
		if typ := r.u32(); r.err == nil && typ != TypeF32 {
			return nil, fmt.Errorf("gguf: tensor %s: ggml type %d, only F32 (0) is read", t.Name, typ)
		}
		offs = append(offs, r.u64())
		f.Tensors = append(f.Tensors, t)
	}
	r.bytes(pad(r.n) - r.n)
	start := r.n
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(offs[a]) - int(offs[b]) })
	for _, i := range order {
		t := &f.Tensors[i]
		if r.err != nil {
			break
		}
		if at := r.n - start; offs[i] < at {
			return nil, fmt.Errorf("gguf: tensor %s: offset %d overlaps the previous tensor (ends at %d)", t.Name, offs[i], at)
		} else {
			r.bytes(offs[i] - at)
		}
		b := r.bytes(4 * elems(t.Dims))
		t.Data = make([]float32, 0, elems(t.Dims))
		for j := 0; j+4 <= len(b); j += 4 {
			t.Data = append(t.Data, math.Float32frombits(binary.LittleEndian.Uint32(b[j:])))
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("gguf: %w", r.err)
	}
	return f, nil
}
