package sim

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// The gRPC service's hot path: each streamed response is appended as
// protobuf bytes, not built as messages and marshalled, so the simulator
// spends little of the CPU it shares with the client under test. The
// bytes are what proto.Marshal of the equivalent ModelStreamInferResponse
// gives (TestEncodedResponseMatchesProto holds them equal).

// encodedMessage is a message already in protobuf wire form.
type encodedMessage struct{ b []byte }

// wireCodec sends encodedMessage as it is and everything else through
// grpc's proto codec.
type wireCodec struct{ proto encoding.CodecV2 }

func newWireCodec() wireCodec { return wireCodec{proto: encoding.GetCodecV2("proto")} }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*encodedMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(m.b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (wireCodec) Name() string { return "proto" }

// Field numbers of inference.proto used below.
const (
	fStreamInferResponse  = 2 // ModelStreamInferResponse.infer_response
	fRespModelName        = 1
	fRespModelVersion     = 2
	fRespID               = 3
	fRespParameters       = 4
	fRespOutputs          = 5
	fRespRawOutput        = 6
	fTensorName           = 1
	fTensorDatatype       = 2
	fTensorShape          = 3
	fParamBool            = 1
	fMapKey, fMapValue    = 1, 2
	finalParameterKey     = "triton_final_response"
	textOutputTensorName  = "text_output"
	inTokensTensorName    = "num_input_tokens"
	outTokensTensorName   = "num_output_tokens"
	bytesType, uint32Type = "BYTES", "UINT32"
)

func appendTensorHeader(b []byte, name, datatype string) []byte {
	var t []byte
	t = protowire.AppendTag(t, fTensorName, protowire.BytesType)
	t = protowire.AppendString(t, name)
	t = protowire.AppendTag(t, fTensorDatatype, protowire.BytesType)
	t = protowire.AppendString(t, datatype)
	t = protowire.AppendTag(t, fTensorShape, protowire.BytesType)
	t = protowire.AppendBytes(t, protowire.AppendVarint(nil, 1)) // packed [1]
	b = protowire.AppendTag(b, fRespOutputs, protowire.BytesType)
	return protowire.AppendBytes(b, t)
}

// responseHead is the part of every streamed ModelInferResponse of q that
// does not change: model, version, id and the output tensors' headers.
func (q *kserveRequest) responseHead(model string) []byte {
	var b []byte
	b = protowire.AppendTag(b, fRespModelName, protowire.BytesType)
	b = protowire.AppendString(b, model)
	b = protowire.AppendTag(b, fRespModelVersion, protowire.BytesType)
	b = protowire.AppendString(b, "1")
	if q.id != "" {
		b = protowire.AppendTag(b, fRespID, protowire.BytesType)
		b = protowire.AppendString(b, q.id)
	}
	b = appendTensorHeader(b, textOutputTensorName, bytesType)
	if q.wantIn {
		b = appendTensorHeader(b, inTokensTensorName, uint32Type)
	}
	if q.wantOut {
		b = appendTensorHeader(b, outTokensTensorName, uint32Type)
	}
	return b
}

// finalParameter is the parameters map entry triton_final_response: true.
var finalParameter = func() []byte {
	var v []byte
	v = protowire.AppendTag(v, fParamBool, protowire.VarintType)
	v = protowire.AppendVarint(v, 1)
	var e []byte
	e = protowire.AppendTag(e, fMapKey, protowire.BytesType)
	e = protowire.AppendString(e, finalParameterKey)
	e = protowire.AppendTag(e, fMapValue, protowire.BytesType)
	e = protowire.AppendBytes(e, v)
	var b []byte
	b = protowire.AppendTag(b, fRespParameters, protowire.BytesType)
	return protowire.AppendBytes(b, e)
}()

// appendStreamResponse appends the ModelStreamInferResponse carrying text
// (and the counts q asked for) to dst, reusing scratch for the inner
// message; it returns both grown.
func (q *kserveRequest) appendStreamResponse(dst, scratch, head []byte, promptTokens int, text []byte, tokens int, final bool) (out, inner []byte) {
	r := append(scratch[:0], head...)
	if final {
		r = append(r, finalParameter...)
	}
	r = protowire.AppendTag(r, fRespRawOutput, protowire.BytesType)
	r = protowire.AppendVarint(r, uint64(4+len(text)))
	r = append(r, byte(len(text)), byte(len(text)>>8), byte(len(text)>>16), byte(len(text)>>24))
	r = append(r, text...)
	u32 := func(r []byte, v int) []byte {
		r = protowire.AppendTag(r, fRespRawOutput, protowire.BytesType)
		r = protowire.AppendVarint(r, 4)
		return append(r, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	if q.wantIn {
		r = u32(r, promptTokens)
	}
	if q.wantOut {
		r = u32(r, tokens)
	}
	dst = protowire.AppendTag(dst, fStreamInferResponse, protowire.BytesType)
	dst = protowire.AppendBytes(dst, r)
	return dst, r
}
