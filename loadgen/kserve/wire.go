package kserve

import (
	"bytes"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// The read path of a stream. Every ModelStreamInferResponse arrives as
// bytes (frameCodec) and decodeStream walks them with protowire, without
// building messages: the response shapes servers send (strings, the
// parameters map with bool values, output headers, raw output contents)
// are read in place. Anything else (typed contents, other parameter
// types, unknown fields, a field repeated where it is not, invalid UTF-8)
// goes to proto.Unmarshal, whose verdict stands. FuzzDecodeStream holds
// the two equal. A response whose bytes before its raw contents are the
// previous one's reads only those contents (headCache).

// event is what the client reads of one response.
type event struct {
	errMsg   []byte // ModelStreamInferResponse.error_message
	hasResp  bool   // infer_response was sent
	id       []byte
	model    []byte // model_name, the model the server says answered (may alias the frame: not reused)
	final    bool   // parameters["triton_final_response"].bool_param
	text     []byte
	tokens   int64 // num_output_tokens; -1: not sent
	inTokens int64 // num_input_tokens; -1: not sent
	finish   []byte

	outs []outputTensor
	raws [][]byte

	head *headCache // kept across reset: the stream's responses share it
}

// headCache is what a response says before its raw_output_contents, kept
// from the last response read in full: a stream's responses differ, as a
// rule, only in those, so a response whose bytes up to there are the
// same reads only its raw contents.
type headCache struct {
	b  []byte // the bytes before the first raw_output_contents, a copy
	ev event  // b read: model, id, final, outs (aliasing b)
}

func (ev *event) reset() {
	*ev = event{text: ev.text[:0], finish: ev.finish[:0], outs: ev.outs[:0], raws: ev.raws[:0], tokens: -1, inTokens: -1, head: ev.head}
}

// summarize reads the outputs: text_output, the token counts and
// finish_reason. Both decoders end here.
func (ev *event) summarize() error {
	if len(ev.raws) > 0 && len(ev.raws) != len(ev.outs) {
		return errRawCount(len(ev.outs), len(ev.raws))
	}
	for i := range ev.outs {
		o := &ev.outs[i]
		if len(ev.raws) > 0 {
			o.raw, o.hasRaw = ev.raws[i], true
		}
		var err error
		switch string(o.name) {
		case outText:
			ev.text, err = o.appendText(ev.text)
		case outOutTokens:
			ev.tokens, err = o.sum()
		case outInTokens:
			ev.inTokens, err = o.sum()
		case outFinish:
			ev.finish, err = o.appendText(ev.finish[:0])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeResponse is the reference reading of a decoded ModelInferResponse.
func decodeResponse(r *pb.ModelInferResponse, ev *event) error {
	ev.hasResp = r != nil
	ev.id = []byte(r.GetId())
	ev.model = []byte(r.GetModelName())
	if p, ok := r.GetParameters()[ParamFinal]; ok && p.GetBoolParam() {
		ev.final = true
	}
	for _, t := range r.GetOutputs() {
		ev.outs = append(ev.outs, outputTensor{name: []byte(t.GetName()), datatype: []byte(t.GetDatatype()), contents: t.GetContents()})
	}
	ev.raws = append(ev.raws, r.GetRawOutputContents()...)
	return ev.summarize()
}

// decodeStreamReference decodes with proto.Unmarshal.
func decodeStreamReference(b []byte, ev *event) error {
	ev.reset()
	var m pb.ModelStreamInferResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		return err
	}
	if e := m.GetErrorMessage(); e != "" {
		ev.errMsg = []byte(e)
	}
	if m.GetInferResponse() == nil {
		return nil
	}
	return decodeResponse(m.GetInferResponse(), ev)
}

// decodeStream decodes one ModelStreamInferResponse into ev (whose slices
// alias b).
func decodeStream(b []byte, ev *event) error {
	ev.reset()
	if handled, err := decodeStreamFast(b, ev); handled {
		return err
	}
	return decodeStreamReference(b, ev)
}

// decodeStreamFast reports handled = false for anything it does not read
// itself.
func decodeStreamFast(b []byte, ev *event) (handled bool, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return false, nil
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false, nil
		}
		b = b[n:]
		switch num {
		case 1: // error_message
			if !utf8.Valid(v) {
				return false, nil
			}
			ev.errMsg = v
		case 2: // infer_response
			if ev.hasResp || !fastResponse(v, ev) {
				return false, nil
			}
			ev.hasResp = true
		default:
			return false, nil
		}
	}
	if len(ev.errMsg) == 0 {
		ev.errMsg = nil
	}
	return true, ev.summarize()
}

// fastResponse reads a ModelInferResponse's fields into ev, its head
// from ev.head when the bytes are the same.
func fastResponse(b []byte, ev *event) bool {
	if h := ev.head; h != nil && len(h.b) > 0 && bytes.HasPrefix(b, h.b) {
		// Fields are read in order, each by its own bytes: the same prefix
		// reads the same, and ends where a field begins.
		if rawsOnly(b[len(h.b):], ev) {
			ev.model, ev.id, ev.final = h.ev.model, h.ev.id, h.ev.final
			ev.outs = append(ev.outs, h.ev.outs...)
			return true
		}
		ev.raws = ev.raws[:0]
	}
	headEnd, ok := readResponse(b, ev)
	if !ok {
		return false
	}
	if headEnd > 0 {
		if ev.head == nil {
			ev.head = &headCache{}
		}
		h := ev.head
		h.b = append(h.b[:0], b[:headEnd]...)
		h.ev = event{outs: h.ev.outs[:0], raws: h.ev.raws[:0]}
		if _, ok := readResponse(h.b, &h.ev); !ok {
			h.b = h.b[:0] // cannot happen: b read the same
		}
	}
	return true
}

// rawsOnly appends b's raw_output_contents to ev.raws; false when b holds
// any other field.
func rawsOnly(b []byte, ev *event) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 6 || typ != protowire.BytesType {
			return false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		ev.raws = append(ev.raws, v)
	}
	return true
}

// readResponse reads a ModelInferResponse's fields into ev. headEnd is
// where its first raw_output_contents begins when only more of them
// follow (0 otherwise): what a later response may share.
func readResponse(b []byte, ev *event) (headEnd int, ok bool) {
	whole := len(b)
	rawsFrom, mixed := -1, false
	for len(b) > 0 {
		at := whole - len(b)
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return 0, false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 6 {
			if rawsFrom < 0 {
				rawsFrom = at
			}
		} else if rawsFrom >= 0 {
			mixed = true
		}
		switch num {
		case 1: // model_name
			if !utf8.Valid(v) {
				return 0, false
			}
			ev.model = v
		case 2: // model_version
			if !utf8.Valid(v) {
				return 0, false
			}
		case 3: // id
			if !utf8.Valid(v) {
				return 0, false
			}
			ev.id = v
		case 4: // parameters entry
			key, val, ok := fastParamEntry(v)
			if !ok {
				return 0, false
			}
			if string(key) == ParamFinal {
				ev.final = val // map semantics: the last entry wins
			}
		case 5: // outputs
			// Read in place: the tensor is not copied into the slice after.
			ev.outs = append(ev.outs, outputTensor{})
			if !fastOutput(v, &ev.outs[len(ev.outs)-1]) {
				return 0, false
			}
		case 6: // raw_output_contents
			ev.raws = append(ev.raws, v)
		default:
			return 0, false
		}
	}
	if rawsFrom > 0 && !mixed {
		return rawsFrom, true
	}
	return 0, true
}

// fastParamEntry reads a map<string, InferParameter> entry whose value, if
// any, is a bool_param.
func fastParamEntry(b []byte) (key []byte, val, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil, false, false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, false, false
		}
		b = b[n:]
		switch num {
		case 1:
			if !utf8.Valid(v) {
				return nil, false, false
			}
			key = v
		case 2:
			val = false
			for len(v) > 0 {
				pn, pt, m := protowire.ConsumeTag(v)
				if m < 0 || pn != 1 || pt != protowire.VarintType {
					return nil, false, false
				}
				v = v[m:]
				x, m := protowire.ConsumeVarint(v)
				if m < 0 {
					return nil, false, false
				}
				v = v[m:]
				val = x != 0
			}
		default:
			return nil, false, false
		}
	}
	return key, val, true
}

// fastOutput reads an InferOutputTensor without parameters or contents
// into o.
func fastOutput(b []byte, o *outputTensor) (ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == 3 && typ == protowire.VarintType { // one shape element, unpacked
			if _, n = protowire.ConsumeVarint(b); n < 0 {
				return false
			}
			b = b[n:]
			continue
		}
		if typ != protowire.BytesType {
			return false
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch num {
		case 1, 2:
			if !utf8.Valid(v) {
				return false
			}
			if num == 1 {
				o.name = v
			} else {
				o.datatype = v
			}
		case 3: // packed shape
			for len(v) > 0 {
				_, m := protowire.ConsumeVarint(v)
				if m < 0 {
					return false
				}
				v = v[m:]
			}
		default:
			return false
		}
	}
	return true
}

// frameCodec hands a received message to the caller as bytes (*frame),
// sends a wireRequest (or *wireRequest) as it is, and marshals other
// messages with grpc's proto codec.
type frameCodec struct{ proto encoding.CodecV2 }

// frame is one received message's bytes, reused across messages.
type frame struct{ b []byte }

func newFrameCodec() frameCodec { return frameCodec{proto: encoding.GetCodecV2("proto")} }

func (c frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch w := v.(type) {
	case wireRequest:
		// grpc-go may write it after SendMsg returns: each request's bytes
		// are its own, never reused.
		return mem.BufferSlice{mem.SliceBuffer(w)}, nil
	case *wireRequest:
		return mem.BufferSlice{mem.SliceBuffer(*w)}, nil
	}
	return c.proto.Marshal(v)
}

func (c frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	f.b = f.b[:0]
	for _, buf := range data {
		f.b = append(f.b, buf.ReadOnlyData()...)
	}
	return nil
}

func (frameCodec) Name() string { return "proto" }
