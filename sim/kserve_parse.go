package sim

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// Reading a KServe v2 inference request, as Triton and the vLLM backend (or
// the TensorRT-LLM ensemble) read it, whether it came over gRPC or was
// built from an HTTP body (generate, TGI, Ollama).

// inferRequest is a validated inference request.
type inferRequest struct {
	id                string // the request's own (may be empty)
	stream, exclude   bool
	wantIn, wantOut   bool
	text              string // text_input
	promptTokens, max int
}

// known reports whether name and version are the served model (version
// "1" or the server's choice).
func (k *kserve) known(name, version string) bool {
	return name == k.s.cfg.Model && (version == "" || version == "1")
}

// unknownModel is Triton's answer for another model.
func unknownModel(name string) error {
	return status.Errorf(codes.NotFound, "Request for unknown model: '%s' is not found", name)
}

// The vLLM backend's tensors (model.py's auto-completed config).
var simInputs = []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_input", Datatype: "BYTES", Shape: []int64{1}},
	{Name: "stream", Datatype: "BOOL", Shape: []int64{1}},
	{Name: "sampling_parameters", Datatype: "BYTES", Shape: []int64{1}},
	{Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{1}},
	{Name: "return_num_input_tokens", Datatype: "BOOL", Shape: []int64{1}},
	{Name: "return_num_output_tokens", Datatype: "BOOL", Shape: []int64{1}},
}

var simOutputs = []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_output", Datatype: "BYTES", Shape: []int64{-1}},
	{Name: "num_input_tokens", Datatype: "UINT32", Shape: []int64{1}},
	{Name: "num_output_tokens", Datatype: "UINT32", Shape: []int64{-1}},
}

// GRPCTensorsHeader is request metadata that makes the model look like the
// TensorRT-LLM backend's ensemble ("trtllm"): its metadata lists
// text_input, max_tokens (INT32, required), stream, exclude_input_in_output,
// temperature, end_id and pad_id, every shape with a leading batch
// dimension ([-1, 1]), and requests are checked against that.
const GRPCTensorsHeader = "x-sim-tensors"

// The TensorRT-LLM ensemble's tensors (config.pbtxt with max_batch_size
// > 0: a leading batch dimension).
var trtInputs = []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_input", Datatype: "BYTES", Shape: []int64{-1, 1}},
	{Name: "max_tokens", Datatype: "INT32", Shape: []int64{-1, 1}},
	{Name: "stream", Datatype: "BOOL", Shape: []int64{-1, 1}},
	{Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{-1, 1}},
	{Name: "temperature", Datatype: "FP32", Shape: []int64{-1, 1}},
	{Name: "end_id", Datatype: "INT32", Shape: []int64{-1, 1}},
	{Name: "pad_id", Datatype: "INT32", Shape: []int64{-1, 1}},
}

var trtOutputs = []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_output", Datatype: "BYTES", Shape: []int64{-1, -1}},
}

// tensorsOf is the model's inputs and outputs for a request's metadata.
func tensorsOf(header func(string) string) (in, out []*pb.ModelMetadataResponse_TensorMetadata, trt bool) {
	if header(GRPCTensorsHeader) == "trtllm" {
		return trtInputs, trtOutputs, true
	}
	return simInputs, simOutputs, false
}

// rawInput returns input i's bytes: raw contents, else typed contents
// re-encoded raw.
func rawInput(r *pb.ModelInferRequest, i int) []byte {
	if raw := r.GetRawInputContents(); i < len(raw) {
		return raw[i]
	}
	c := r.GetInputs()[i].GetContents()
	var b []byte
	for _, e := range c.GetBytesContents() {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e)))
		b = append(b, e...)
	}
	for _, v := range c.GetBoolContents() {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	for _, v := range c.GetIntContents() {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// shapeFits reports whether a request's shape matches a declared one: as
// many dimensions, -1 taking any size.
func shapeFits(got, decl []int64) bool {
	if len(got) != len(decl) {
		return false
	}
	for i := range got {
		if decl[i] != -1 && got[i] != decl[i] {
			return false
		}
	}
	return true
}

// firstBytesElement decodes the first element of a raw BYTES tensor.
func firstBytesElement(raw []byte) (string, error) {
	if len(raw) < 4 {
		return "", errors.New("BYTES tensor shorter than its 4-byte length")
	}
	n := binary.LittleEndian.Uint32(raw)
	if uint64(n) > uint64(len(raw)-4) {
		return "", errors.New("BYTES element length runs past the tensor's end")
	}
	return string(raw[4 : 4+n]), nil
}

// parse checks a request against the model's tensors (names, data types,
// shapes), as Triton and the vLLM backend (or the TensorRT-LLM ensemble)
// do.
func (k *kserve) parse(r *pb.ModelInferRequest, header func(string) string) (*inferRequest, error) {
	inputs, _, trt := tensorsOf(header)
	s := k.s
	if !k.known(r.GetModelName(), r.GetModelVersion()) {
		return nil, unknownModel(r.GetModelName())
	}
	if raw := r.GetRawInputContents(); len(raw) > 0 && len(raw) != len(r.GetInputs()) {
		return nil, status.Errorf(codes.InvalidArgument, "expected %d raw input contents, got %d", len(r.GetInputs()), len(raw))
	}
	q := &inferRequest{id: r.GetId(), max: s.cfg.DefaultMaxTokens}
	haveText, haveMax := false, false
	for i, in := range r.GetInputs() {
		raw := rawInput(r, i)
		name := in.GetName()
		var decl *pb.ModelMetadataResponse_TensorMetadata
		for _, t := range inputs {
			if t.Name == name {
				decl = t
			}
		}
		if decl == nil {
			return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] unexpected inference input '%s' for model '%s'", q.id, name, s.cfg.Model)
		}
		if !shapeFits(in.GetShape(), decl.Shape) {
			return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] unexpected shape for input '%s' for model '%s'. Expected %v, got %v",
				q.id, name, s.cfg.Model, decl.Shape, in.GetShape())
		}
		if in.GetDatatype() != decl.Datatype {
			return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] inference input '%s' data-type is '%s', but model '%s' expects '%s'",
				q.id, name, in.GetDatatype(), s.cfg.Model, decl.Datatype)
		}
		if decl.Datatype == "BOOL" {
			if len(raw) < 1 {
				return nil, status.Errorf(codes.InvalidArgument, "input '%s': no data", name)
			}
			v := raw[0] != 0
			switch name {
			case "stream":
				q.stream = v
			case "exclude_input_in_output":
				q.exclude = v
			case "return_num_input_tokens":
				q.wantIn = v
			case "return_num_output_tokens":
				q.wantOut = v
			}
			continue
		}
		if decl.Datatype == "INT32" || decl.Datatype == "FP32" {
			if len(raw) < 4 {
				return nil, status.Errorf(codes.InvalidArgument, "input '%s': fewer than 4 bytes", name)
			}
			if name == "max_tokens" {
				q.max, haveMax = int(int32(binary.LittleEndian.Uint32(raw))), true
			}
			continue
		}
		str, err := firstBytesElement(raw)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "input '%s': %v", name, err)
		}
		switch name {
		case "text_input":
			q.text, haveText = str, true
		case "sampling_parameters":
			var sp map[string]any
			d := json.NewDecoder(strings.NewReader(str))
			d.UseNumber()
			if err := d.Decode(&sp); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "sampling_parameters: %v", err)
			}
			if v, ok := sp["max_tokens"]; ok {
				n, err := strconv.Atoi(strings.Trim(fmt.Sprint(v), `"`))
				if err != nil {
					return nil, status.Errorf(codes.InvalidArgument, "sampling_parameters max_tokens %v: not a whole number", v)
				}
				q.max = n
			}
		}
	}
	if !haveText {
		return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] expected 1 inputs but got 0 inputs for model '%s': input 'text_input' is missing", q.id, s.cfg.Model)
	}
	if trt && !haveMax {
		return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] expected 2 inputs but got 1 inputs for model '%s': input 'max_tokens' is missing", q.id, s.cfg.Model)
	}
	if q.stream && !q.exclude && !trt {
		return nil, status.Error(codes.InvalidArgument, "When streaming, `exclude_input_in_output` = False is not allowed.")
	}
	if q.max < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "max_tokens must be at least 1, got %d.", q.max)
	}
	q.promptTokens = s.cfg.TokenCounter(q.text) + s.cfg.PromptOverheadTokens
	if len(s.engines) > 0 && q.promptTokens+q.max > s.cfg.KVTokens {
		return nil, status.Errorf(codes.InvalidArgument, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion).",
			s.cfg.KVTokens, q.promptTokens+q.max, q.promptTokens, q.max)
	}
	return q, nil
}

// parseCode reads a gRPC code by name or number.
func parseCode(v string) (codes.Code, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 16 {
		return codes.Code(n), nil
	}
	want := strings.ToLower(strings.ReplaceAll(v, "_", ""))
	for c := codes.Code(1); c <= 16; c++ {
		if strings.ToLower(c.String()) == want {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%s %q: not a gRPC code", GRPCStatusHeader, v)
}
