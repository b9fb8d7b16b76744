package kserve

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/prompts"
)

// The TensorRT-LLM ensemble's metadata (config.pbtxt with max_batch_size
// > 0: every shape has a leading -1).
var trtMetadata = &pb.ModelMetadataResponse{Name: "ensemble", Inputs: []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_input", Datatype: "BYTES", Shape: []int64{-1, 1}},
	{Name: "max_tokens", Datatype: "INT32", Shape: []int64{-1, 1}},
	{Name: "stream", Datatype: "BOOL", Shape: []int64{-1, 1}},
	{Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{-1, 1}},
	{Name: "temperature", Datatype: "FP32", Shape: []int64{-1, 1}},
	{Name: "end_id", Datatype: "INT32", Shape: []int64{-1, 1}},
}, Outputs: []*pb.ModelMetadataResponse_TensorMetadata{{Name: "text_output", Datatype: "BYTES", Shape: []int64{-1, -1}}}}

func bytesElem(s string) []byte { return AppendBytesElement(nil, []byte(s)) }

func TestBuildRequestTRTLLM(t *testing.T) {
	spec, err := specFromMetadata(trtMetadata, TensorsAuto)
	if err != nil || spec.tensors != TensorsTRTLLM {
		t.Fatalf("%v %v", spec, err)
	}
	c := &Client{model: "ensemble"}
	p := &prompts.Prompt{Text: "What is ML?", Params: map[string]any{"temperature": 0.5, "end_id": 2, "max_tokens": 9,
		"beam_width_hint": "x", "parameters": map[string]any{"priority": 1}}}
	req, err := c.buildRequest(spec, p, "r1", 3, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"text_input": bytesElem("What is ML?"), "stream": {1}, "exclude_input_in_output": {1},
		"max_tokens": {9, 0, 0, 0}, "end_id": {2, 0, 0, 0}, "temperature": {0, 0, 0, 0x3f}}
	if len(req.Inputs) != len(want) || len(req.RawInputContents) != len(want) {
		t.Fatalf("%d inputs: %v", len(req.Inputs), req.Inputs)
	}
	for i, in := range req.Inputs {
		if w, ok := want[in.Name]; !ok || !bytes.Equal(req.RawInputContents[i], w) {
			t.Errorf("%s: % x, want % x", in.Name, req.RawInputContents[i], w)
		}
		if len(in.Shape) != 2 || in.Shape[0] != 1 || in.Shape[1] != 1 {
			t.Errorf("%s shape %v, want [1 1]", in.Name, in.Shape)
		}
	}
	if req.Id != "r1" || req.Parameters["priority"].GetInt64Param() != 1 ||
		req.Parameters["beam_width_hint"].GetStringParam() != "x" || !req.Parameters["triton_enable_empty_final_response"].GetBoolParam() {
		t.Errorf("parameters %v", req.Parameters)
	}
}

func TestBuildRequestVLLM(t *testing.T) {
	c := &Client{model: "vllm_model"}
	p := &prompts.Prompt{Text: "hi", Params: map[string]any{"temperature": 0, "ignore_eos": true,
		"sampling_parameters": map[string]any{"top_p": 0.9}}}
	req, err := c.buildRequest(defaultSpec(TensorsAuto), p, "7", 16, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, in := range req.Inputs {
		names = append(names, in.Name)
		if in.Name == "sampling_parameters" {
			got := string(req.RawInputContents[i][4:])
			if got != `{"ignore_eos":true,"max_tokens":16,"temperature":0,"top_p":0.9}` {
				t.Errorf("sampling_parameters %s", got)
			}
		}
	}
	if strings.Join(names, ",") != "text_input,stream,exclude_input_in_output,sampling_parameters" || len(req.Parameters) != 0 {
		t.Errorf("inputs %v, parameters %v", names, req.Parameters)
	}
	if _, err := c.buildRequest(defaultSpec(TensorsVLLM), &prompts.Prompt{Params: map[string]any{"stream": false}}, "1", 1, true); err == nil {
		t.Error("params.stream accepted")
	}
}

// A model without the tensors the convention needs fails with a message
// naming the tensor and what the model has instead.
func TestSpecFromMetadataErrors(t *testing.T) {
	md := &pb.ModelMetadataResponse{Name: "resnet", Inputs: []*pb.ModelMetadataResponse_TensorMetadata{{Name: "INPUT0", Datatype: "FP32"}},
		Outputs: []*pb.ModelMetadataResponse_TensorMetadata{{Name: "OUTPUT0", Datatype: "FP32"}}}
	if _, err := specFromMetadata(md, TensorsAuto); err == nil || !strings.Contains(err.Error(), `model "resnet" has no input tensor "text_input"`) ||
		!strings.Contains(err.Error(), `["INPUT0"]`) {
		t.Errorf("%v", err)
	}
	md.Inputs[0].Name, md.Inputs[0].Datatype = "text_input", "BYTES"
	if _, err := specFromMetadata(md, TensorsAuto); err == nil || !strings.Contains(err.Error(), `no output tensor "text_output"`) {
		t.Errorf("%v", err)
	}
	if _, err := specFromMetadata(md, TensorsTRTLLM); err == nil || !strings.Contains(err.Error(), `"max_tokens"`) {
		t.Errorf("%v", err)
	}
}

// referenceBytesElements is the plain decoding of a raw BYTES tensor.
func referenceBytesElements(raw []byte) ([][]byte, bool) {
	var out [][]byte
	for i := 0; i < len(raw); {
		if len(raw)-i < 4 {
			return out, false
		}
		n := int(binary.LittleEndian.Uint32(raw[i:]))
		i += 4
		if n < 0 || n > len(raw)-i {
			return out, false
		}
		out = append(out, raw[i:i+n])
		i += n
	}
	return out, true
}

// FuzzEachBytesElement holds the decoder equal to the reference, and
// encoding then decoding to the identity.
func FuzzEachBytesElement(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0, 'a', 'b', 'c', 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 'x'})
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got [][]byte
		err := EachBytesElement(raw, func(e []byte) { got = append(got, e) })
		want, ok := referenceBytesElements(raw)
		if (err == nil) != ok || len(got) != len(want) {
			t.Fatalf("% x: %d elements, %v; reference %d, %v", raw, len(got), err, len(want), ok)
		}
		var again []byte
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("element %d: %q, reference %q", i, got[i], want[i])
			}
			again = AppendBytesElement(again, got[i])
		}
		if ok && !bytes.Equal(again, raw) {
			t.Fatalf("re-encoding % x gave % x", raw, again)
		}
	})
}
