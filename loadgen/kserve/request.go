package kserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/prompts"
)

// Tensors names a backend's tensor convention.
type Tensors string

const (
	// TensorsAuto picks the convention from the model's metadata:
	// TensorsVLLM when it takes sampling_parameters, TensorsTRTLLM when it
	// takes max_tokens, TensorsVLLM when there is no metadata.
	TensorsAuto Tensors = ""
	// TensorsVLLM is Triton's vLLM backend: text_input BYTES, stream BOOL,
	// sampling_parameters BYTES (a JSON object: max_tokens and any sampling
	// option), exclude_input_in_output BOOL, and, where the model declares
	// them, return_num_input_tokens and return_num_output_tokens BOOL;
	// outputs text_output BYTES (the new text of each response),
	// num_input_tokens and num_output_tokens UINT32 (the tokens of each
	// response).
	TensorsVLLM Tensors = "vllm"
	// TensorsTRTLLM is the TensorRT-LLM backend's ensemble: text_input
	// BYTES, max_tokens INT32 (required), stream BOOL,
	// exclude_input_in_output BOOL, with a leading batch dimension when
	// the model batches ([1, 1]); output text_output BYTES.
	TensorsTRTLLM Tensors = "trtllm"
)

// Tensor and parameter names of the conventions.
const (
	inText         = "text_input"
	inStream       = "stream"
	inSampling     = "sampling_parameters"
	inExclude      = "exclude_input_in_output"
	inMaxTokens    = "max_tokens"
	inRetInTokens  = "return_num_input_tokens"
	inRetOutTokens = "return_num_output_tokens"
	outText        = "text_output"
	outInTokens    = "num_input_tokens"
	outOutTokens   = "num_output_tokens"
	outFinish      = "finish_reason"

	// ParamFinal marks a decoupled model's last response.
	ParamFinal = "triton_final_response"
	// paramEmptyFinal asks Triton to send a flag-only final response too,
	// so that a backend that ends with one does not leave the stream
	// waiting.
	paramEmptyFinal = "triton_enable_empty_final_response"
	// paramsKey is the key of Prompt.Params that holds request parameters.
	paramsKey = "parameters"
)

// tensorSpec is a declared input or output.
type tensorSpec struct {
	datatype string
	shape    []int64
}

// modelSpec is what the client knows of the model's tensors.
type modelSpec struct {
	tensors Tensors
	known   bool // from ModelMetadata; otherwise the convention's defaults
	inputs  map[string]tensorSpec
	outputs map[string]tensorSpec
}

// defaultSpec is the convention's tensors when no metadata was read.
func defaultSpec(t Tensors) *modelSpec {
	if t == TensorsAuto {
		t = TensorsVLLM
	}
	in := map[string]tensorSpec{
		inText:    {TypeBytes, []int64{1}},
		inStream:  {TypeBool, []int64{1}},
		inExclude: {TypeBool, []int64{1}},
	}
	if t == TensorsVLLM {
		in[inSampling] = tensorSpec{TypeBytes, []int64{1}}
	} else {
		in[inMaxTokens] = tensorSpec{TypeInt32, []int64{1}}
	}
	return &modelSpec{tensors: t, inputs: in, outputs: map[string]tensorSpec{outText: {TypeBytes, []int64{-1}}}}
}

// specFromMetadata reads the model's tensors and settles the convention.
func specFromMetadata(md *pb.ModelMetadataResponse, want Tensors) (*modelSpec, error) {
	s := &modelSpec{known: true, inputs: map[string]tensorSpec{}, outputs: map[string]tensorSpec{}}
	var ins, outs []string
	for _, t := range md.GetInputs() {
		s.inputs[t.GetName()] = tensorSpec{t.GetDatatype(), t.GetShape()}
		ins = append(ins, t.GetName())
	}
	for _, t := range md.GetOutputs() {
		s.outputs[t.GetName()] = tensorSpec{t.GetDatatype(), t.GetShape()}
		outs = append(outs, t.GetName())
	}
	s.tensors = want
	if want == TensorsAuto {
		s.tensors = TensorsVLLM
		if _, ok := s.inputs[inMaxTokens]; ok {
			s.tensors = TensorsTRTLLM
		}
		if _, ok := s.inputs[inSampling]; ok {
			s.tensors = TensorsVLLM
		}
	}
	need := []string{inText}
	if s.tensors == TensorsTRTLLM {
		need = append(need, inMaxTokens)
	}
	for _, n := range need {
		if _, ok := s.inputs[n]; !ok {
			return nil, fmt.Errorf("model %q has no input tensor %q (%s convention; its inputs: %s)",
				md.GetName(), n, s.tensors, list(ins))
		}
	}
	if _, ok := s.outputs[outText]; !ok {
		return nil, fmt.Errorf("model %q has no output tensor %q (its outputs: %s)", md.GetName(), outText, list(outs))
	}
	if dt := s.inputs[inText].datatype; dt != TypeBytes {
		return nil, fmt.Errorf("model %q: input %q is %s, want BYTES", md.GetName(), inText, dt)
	}
	return s, nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	b, _ := json.Marshal(names)
	return string(b)
}

// has reports whether the model takes input name.
func (s *modelSpec) has(name string) bool {
	_, ok := s.inputs[name]
	return ok
}

// buildRequest makes the request for p. Prompt.Params place each key by
// the model's tensors: a key that names an input of the model is sent as
// that tensor (in its declared type); "parameters" (an object) becomes
// request parameters; with TensorsVLLM every other key joins
// sampling_parameters (an object there is merged), with TensorsTRTLLM it
// becomes a request parameter.
func (c *Client) buildRequest(spec *modelSpec, p *prompts.Prompt, id string, maxTokens int, stream bool) (*pb.ModelInferRequest, error) {
	req := &pb.ModelInferRequest{ModelName: c.model, ModelVersion: c.version, Id: id,
		Parameters: map[string]*pb.InferParameter{}}
	var sent []string
	add := func(name string, v any) error {
		ts, ok := spec.inputs[name]
		if !ok {
			return nil // the model does not take it
		}
		raw, err := encodeScalar(ts.datatype, v)
		if err != nil {
			return fmt.Errorf("input %q: %w", name, err)
		}
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: name, Datatype: ts.datatype, Shape: shapeFor(ts.shape)})
		req.RawInputContents = append(req.RawInputContents, raw)
		sent = append(sent, name)
		return nil
	}
	if err := add(inText, p.Completion()); err != nil {
		return nil, err
	}
	if err := add(inStream, stream); err != nil {
		return nil, err
	}
	// The vLLM backend refuses to stream the prompt back; without it the
	// answer would start with the prompt.
	if err := add(inExclude, true); err != nil {
		return nil, err
	}
	if spec.known {
		if err := add(inRetInTokens, true); err != nil {
			return nil, err
		}
		if err := add(inRetOutTokens, true); err != nil {
			return nil, err
		}
	}
	sampling := map[string]any{}
	if maxTokens > 0 {
		if spec.tensors == TensorsVLLM {
			sampling[inMaxTokens] = maxTokens
		} else if err := add(inMaxTokens, maxTokens); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(p.Params))
	for k := range p.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := p.Params[k]
		switch {
		case k == paramsKey:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("params.parameters: want an object, got %T", v)
			}
			for pk, pv := range m {
				ip, err := inferParameter(pv)
				if err != nil {
					return nil, fmt.Errorf("params.parameters.%s: %w", pk, err)
				}
				req.Parameters[pk] = ip
			}
		case k == inText || k == inStream:
			return nil, fmt.Errorf("params.%s: set by tailgate", k)
		case k == inSampling && spec.tensors == TensorsVLLM:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("params.sampling_parameters: want an object, got %T", v)
			}
			for sk, sv := range m {
				sampling[sk] = sv
			}
		case spec.has(k) && !slices.Contains(sent, k):
			if err := add(k, v); err != nil {
				return nil, fmt.Errorf("params.%s: %w", k, err)
			}
		case spec.has(k): // a tensor tailgate sets (max_tokens): the prompt's wins
			i := slices.Index(sent, k)
			raw, err := encodeScalar(spec.inputs[k].datatype, v)
			if err != nil {
				return nil, fmt.Errorf("params.%s: %w", k, err)
			}
			req.RawInputContents[i] = raw
		case spec.tensors == TensorsVLLM:
			sampling[k] = v
		default:
			ip, err := inferParameter(v)
			if err != nil {
				return nil, fmt.Errorf("params.%s: %w", k, err)
			}
			req.Parameters[k] = ip
		}
	}
	if spec.tensors == TensorsVLLM && len(sampling) > 0 {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(sampling); err != nil {
			return nil, fmt.Errorf("sampling_parameters: %w", err)
		}
		if err := add(inSampling, string(bytes.TrimSpace(buf.Bytes()))); err != nil {
			return nil, err
		}
	}
	if stream {
		req.Parameters[paramEmptyFinal] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}}
	}
	return req, nil
}

// inferParameter converts a JSON value to a request parameter.
func inferParameter(v any) (*pb.InferParameter, error) {
	switch x := v.(type) {
	case bool:
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: x}}, nil
	case string:
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: x}}, nil
	}
	f, ok := toFloat(v)
	if !ok {
		return nil, fmt.Errorf("want a bool, string or number, got %T", v)
	}
	if f == float64(int64(f)) {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: int64(f)}}, nil
	}
	return &pb.InferParameter{ParameterChoice: &pb.InferParameter_DoubleParam{DoubleParam: f}}, nil
}
