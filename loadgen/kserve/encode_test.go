package kserve

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/prompts"
)

// referenceStream is a streamed request built as messages and marshalled.
func referenceStream(t testing.TB, c *Client, spec *modelSpec, p *prompts.Prompt, id string, maxTokens int, stream bool) []byte {
	t.Helper()
	req, err := c.buildRequest(spec, p, id, maxTokens, stream)
	if err != nil {
		t.Fatal(err)
	}
	withEmptyFinal(req)
	b, err := deterministic.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStreamRequestBytes: the template with its id and text spliced in
// is, byte for byte, proto.Marshal of the request built as messages, for
// every convention, id, text and shape, from the cache as when built.
func TestStreamRequestBytes(t *testing.T) {
	trt, err := specFromMetadata(trtMetadata, TensorsAuto)
	if err != nil {
		t.Fatal(err)
	}
	vllmKnown, err := specFromMetadata(&pb.ModelMetadataResponse{Name: "vllm_model", Inputs: []*pb.ModelMetadataResponse_TensorMetadata{
		{Name: "text_input", Datatype: "BYTES", Shape: []int64{1}}, {Name: "stream", Datatype: "BOOL", Shape: []int64{1}},
		{Name: "sampling_parameters", Datatype: "BYTES", Shape: []int64{1}}, {Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{1}},
		{Name: "return_num_output_tokens", Datatype: "BOOL", Shape: []int64{1}},
	}, Outputs: []*pb.ModelMetadataResponse_TensorMetadata{{Name: "text_output", Datatype: "BYTES", Shape: []int64{-1}}}}, TensorsAuto)
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]*modelSpec{"vllm": defaultSpec(TensorsVLLM), "trtllm": defaultSpec(TensorsTRTLLM), "trt-metadata": trt, "vllm-metadata": vllmKnown}
	long := strings.Repeat("long prompt é ", 300)
	prompts := []*prompts.Prompt{
		{Text: "hi"},
		{Text: ""},
		{Text: long},
		{Messages: []prompts.Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}},
		{Text: "with params", Params: map[string]any{"temperature": 0.5, "parameters": map[string]any{"priority": 1}}},
	}
	for name, spec := range specs {
		for _, version := range []string{"", "3"} {
			c := &Client{model: "m", version: version}
			for _, stream := range []bool{true, false} {
				for _, maxTokens := range []int{0, 16, 300} {
					// Twice: the second time from the cache, with other texts.
					for range 2 {
						for i, p := range prompts {
							for _, id := range []string{"", "7", strings.Repeat("x", 200)} {
								got, err := c.streamRequest(spec, p, id, maxTokens, stream)
								if err != nil {
									t.Fatal(err)
								}
								if want := referenceStream(t, c, spec, p, id, maxTokens, stream); !bytes.Equal(got, want) {
									t.Fatalf("%s version %q stream %v max %d prompt %d id %q:\n got % x\nwant % x",
										name, version, stream, maxTokens, i, id, got, want)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestStreamRequestError: a shape the model's tensors refuse fails, from
// the cache as when built.
func TestStreamRequestError(t *testing.T) {
	spec := defaultSpec(TensorsTRTLLM)
	spec.inputs[inMaxTokens] = tensorSpec{datatype: TypeBool, shape: []int64{1}}
	c := &Client{model: "m"}
	for range 2 {
		if _, err := c.streamRequest(spec, &prompts.Prompt{Text: "x"}, "1", 8, true); err == nil || !strings.Contains(err.Error(), "max_tokens") {
			t.Fatalf("err %v, want the max_tokens input refused", err)
		}
	}
}

// TestFrameCodec: a wireRequest is sent as it is, and decodes as the
// request it encodes; a received message reaches a *frame as its bytes,
// however grpc split it; other messages go through the proto codec.
func TestFrameCodec(t *testing.T) {
	codec := newFrameCodec()
	c := &Client{model: "m"}
	p := &prompts.Prompt{Text: "round trip"}
	wire, err := c.streamRequest(defaultSpec(TensorsVLLM), p, "42", 5, true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := codec.Marshal(wire)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1 || !bytes.Equal(data.Materialize(), wire) || &data[0].ReadOnlyData()[0] != &wire[0] {
		t.Fatalf("marshal copied or changed the bytes: % x", data.Materialize())
	}
	var back pb.ModelInferRequest
	if err := codec.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	want, err := c.buildRequest(defaultSpec(TensorsVLLM), p, "42", 5, true)
	if err != nil {
		t.Fatal(err)
	}
	withEmptyFinal(want)
	if !proto.Equal(&back, want) {
		t.Fatalf("decoded %v, want %v", &back, want)
	}
	msg, err := codec.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var again pb.ModelInferRequest
	if err := proto.Unmarshal(msg.Materialize(), &again); err != nil || !proto.Equal(&again, want) {
		t.Fatalf("proto message through the codec: %v %v", &again, err)
	}
	split := mem.BufferSlice{mem.SliceBuffer(wire[:3]), mem.SliceBuffer(wire[3:])}
	var fr frame
	for range 2 {
		if err := codec.Unmarshal(split, &fr); err != nil || !bytes.Equal(fr.b, wire) {
			t.Fatalf("frame % x (%v), want % x", fr.b, err, wire)
		}
	}
}

// BenchmarkStreamRequest: a streamed request from its template against
// built as messages and marshalled as grpc's proto codec does.
func BenchmarkStreamRequest(b *testing.B) {
	spec := defaultSpec(TensorsVLLM)
	p := &prompts.Prompt{Text: strings.Repeat("a prompt of some length ", 20)}
	b.Run("template", func(b *testing.B) {
		c := &Client{model: "m"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.streamRequest(spec, p, "1234", 128, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("messages", func(b *testing.B) {
		c := &Client{model: "m"}
		b.ReportAllocs()
		for b.Loop() {
			req, err := c.buildRequest(spec, p, "1234", 128, true)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := proto.Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
