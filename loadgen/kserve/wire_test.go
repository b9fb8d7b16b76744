package kserve

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

func u32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

func boolParam(v bool) *pb.InferParameter {
	return &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: v}}
}

// Response shapes: Triton's (raw contents, final flag), typed contents,
// errors, and broken ones.
func streamVectors() []*pb.ModelStreamInferResponse {
	out := func(name, dt string) *pb.ModelInferResponse_InferOutputTensor {
		return &pb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: dt, Shape: []int64{1}}
	}
	return []*pb.ModelStreamInferResponse{
		{InferResponse: &pb.ModelInferResponse{ModelName: "m", ModelVersion: "1", Id: "7",
			Outputs:           []*pb.ModelInferResponse_InferOutputTensor{out("text_output", "BYTES"), out("num_output_tokens", "UINT32")},
			RawOutputContents: [][]byte{AppendBytesElement(nil, []byte(" the")), u32(1)}}},
		{InferResponse: &pb.ModelInferResponse{Id: "7", Parameters: map[string]*pb.InferParameter{ParamFinal: boolParam(true)},
			Outputs:           []*pb.ModelInferResponse_InferOutputTensor{out("text_output", "BYTES"), out("num_input_tokens", "UINT32"), out("finish_reason", "BYTES")},
			RawOutputContents: [][]byte{AppendBytesElement(AppendBytesElement(nil, []byte("a")), []byte("b")), u32(9), AppendBytesElement(nil, []byte("stop"))}}},
		{InferResponse: &pb.ModelInferResponse{Parameters: map[string]*pb.InferParameter{ParamFinal: boolParam(true), "other": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 3}}}}},
		{InferResponse: &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "text_output", Datatype: "BYTES",
			Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("typed")}}}, {Name: "num_output_tokens", Datatype: "INT32", Contents: &pb.InferTensorContents{IntContents: []int32{2}}}}}},
		{ErrorMessage: "engine failed", InferResponse: &pb.ModelInferResponse{Id: "7"}},
		{ErrorMessage: "no response"},
		{InferResponse: &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("text_output", "BYTES")},
			RawOutputContents: [][]byte{{0xff, 0xff, 0, 0, 'x'}}}},
		{InferResponse: &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("text_output", "BYTES"), out("x", "FP32")},
			RawOutputContents: [][]byte{AppendBytesElement(nil, []byte("a"))}}},
		{InferResponse: &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("num_output_tokens", "FP32")}, RawOutputContents: [][]byte{u32(1)}}},
		{},
	}
}

func describe(ev *event, err error) string {
	return fmt.Sprintf("err=%v msg=%q resp=%v id=%q model=%q final=%v text=%q tokens=%d in=%d finish=%q",
		err, ev.errMsg, ev.hasResp, ev.id, ev.model, ev.final, ev.text, ev.tokens, ev.inTokens, ev.finish)
}

// TestDecodeStreamVectors: the fast decoder reads the common shapes itself
// and agrees with the reference on all of them.
func TestDecodeStreamVectors(t *testing.T) {
	for i, m := range streamVectors() {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var fast, ref event
		fast.reset()
		handled, ferr := decodeStreamFast(b, &fast)
		rerr := decodeStreamReference(b, &ref)
		if i < 2 && !handled {
			t.Errorf("vector %d: Triton's shape not read by the fast decoder", i)
		}
		if i == 0 && string(fast.model) != "m" {
			t.Errorf("vector 0: model %q, want the response's model_name", fast.model)
		}
		if handled && describe(&fast, ferr) != describe(&ref, rerr) {
			t.Errorf("vector %d:\nfast %s\nref  %s", i, describe(&fast, ferr), describe(&ref, rerr))
		}
		var ev event
		if derr := decodeStream(b, &ev); describe(&ev, derr) != describe(&ref, rerr) {
			t.Errorf("vector %d: decodeStream %s, ref %s", i, describe(&ev, derr), describe(&ref, rerr))
		}
	}
}

// A stream's responses that share their head with the one before are
// read from it (headCache), and read the same as each alone, whatever
// came before: every pair of vectors, and Triton-shaped responses that
// differ in their text, id, final flag, or in a field after the raw
// contents.
func TestDecodeStreamHeadCache(t *testing.T) {
	tok := func(id, text string, final bool) *pb.ModelStreamInferResponse {
		return &pb.ModelStreamInferResponse{InferResponse: &pb.ModelInferResponse{ModelName: "m", Id: id,
			Parameters: map[string]*pb.InferParameter{ParamFinal: boolParam(final)},
			Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "text_output", Datatype: "BYTES", Shape: []int64{1}},
				{Name: "num_output_tokens", Datatype: "UINT32", Shape: []int64{1}}},
			RawOutputContents: [][]byte{AppendBytesElement(nil, []byte(text)), u32(uint32(len(text)))}}}
	}
	var frames [][]byte
	for _, m := range append(streamVectors(), tok("7", " a", false), tok("7", " bcd", false), tok("8", " a", false),
		tok("7", "", true), tok("7", " z", false)) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b)
	}
	// A field after the raw contents: the head is not shared.
	frames = append(frames, protowire.AppendBytes(protowire.AppendTag(bytes.Clone(frames[len(frames)-1]), 9, protowire.BytesType), nil))
	hits := 0
	for i, a := range frames {
		for j, b := range frames {
			var ev, ref event
			if err := decodeStream(bytes.Clone(a), &ev); err == nil && ev.head != nil && len(ev.head.b) > 0 && bytes.Contains(b, ev.head.b) {
				hits++
			}
			err := decodeStream(bytes.Clone(b), &ev)
			rerr := decodeStreamReference(b, &ref)
			if describe(&ev, err) != describe(&ref, rerr) {
				t.Errorf("vector %d after %d:\ncached %s\nref    %s", j, i, describe(&ev, err), describe(&ref, rerr))
			}
		}
	}
	if hits == 0 {
		t.Error("no response was read from a head")
	}
}

// FuzzDecodeStream holds the fast decoder equal to proto.Unmarshal and the
// reference reading wherever it does not defer to them.
func FuzzDecodeStream(f *testing.F) {
	for _, m := range streamVectors() {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	first, _ := proto.Marshal(streamVectors()[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, ref event
		fast.reset()
		handled, ferr := decodeStreamFast(bytes.Clone(b), &fast)
		rerr := decodeStreamReference(b, &ref)
		if handled && describe(&fast, ferr) != describe(&ref, rerr) {
			t.Fatalf("% x:\nfast %s\nref  %s", b, describe(&fast, ferr), describe(&ref, rerr))
		}
		// Again, and after a Triton-shaped response: through the head
		// either left.
		for _, prev := range [][]byte{b, first} {
			var cached event
			decodeStream(bytes.Clone(prev), &cached)
			derr := decodeStream(bytes.Clone(b), &cached)
			if describe(&cached, derr) != describe(&ref, rerr) {
				t.Fatalf("% x after % x:\ncached %s\nref    %s", b, prev, describe(&cached, derr), describe(&ref, rerr))
			}
		}
	})
}

// BenchmarkDecodeStream: one Triton-shaped streamed response (a token of
// text, its count, the final flag), the protowire decoder against
// proto.Unmarshal and the reference reading.
func BenchmarkDecodeStream(b *testing.B) {
	m := streamVectors()[0]
	m.InferResponse.Parameters = map[string]*pb.InferParameter{ParamFinal: boolParam(false)}
	raw, _ := proto.Marshal(m)
	for _, bc := range []struct {
		name string
		f    func([]byte, *event) error
	}{{"fast", decodeStream}, {"reference", decodeStreamReference}} {
		b.Run(bc.name, func(b *testing.B) {
			var ev event
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if err := bc.f(raw, &ev); err != nil || len(ev.text) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
