package kserve

import (
	"encoding/binary"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/prompts"
)

// The write path of a stream. A ModelInferRequest built as messages (its
// parameters map, tensors, the sampling JSON) and marshalled by
// reflection cost more per request than reading its responses, so a
// streamed request is sent as bytes (wireRequest) that frameCodec passes
// through. For a prompt without Params everything but the id and the
// text depends only on the request's shape (the model's tensors,
// max_tokens, the stream flag): that is encoded once per shape
// (template), and each request is the template with its id and text
// spliced in, in field order, so the bytes are those proto.Marshal
// gives (deterministically) for the same request.

// wireRequest is an encoded ModelInferRequest.
type wireRequest []byte

// shapeKey is what a template depends on.
type shapeKey struct {
	spec      *modelSpec
	maxTokens int
	stream    bool
}

// template is a request's bytes around its id and its text_input.
type template struct {
	head []byte // model_name, model_version (fields 1, 2)
	mid  []byte // parameters, inputs, outputs (fields 4 to 6)
	tail []byte // raw_input_contents after text_input's (field 7)
	text bool   // text_input is raw_input_contents[0]
	err  error  // the shape cannot be built (a tensor's type refuses its value)
}

// maxTemplates bounds the shapes kept: max_tokens drawn from a
// distribution makes one shape per value.
const maxTemplates = 256

// templates caches the client's request shapes.
type templates struct {
	mu sync.Mutex
	m  map[shapeKey]*template
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// withEmptyFinal asks for the flag-only final response on a streamed RPC.
func withEmptyFinal(req *pb.ModelInferRequest) {
	if req.Parameters == nil {
		req.Parameters = map[string]*pb.InferParameter{}
	}
	req.Parameters[paramEmptyFinal] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}}
}

// streamRequest encodes p's request for ModelStreamInfer (stream: the
// stream input's value), with the flag-only final response asked for.
func (c *Client) streamRequest(spec *modelSpec, p *prompts.Prompt, id string, maxTokens int, stream bool) (wireRequest, error) {
	if len(p.Params) > 0 {
		// Params place keys by the model's tensors and may set any of
		// them: built and marshalled whole.
		req, err := c.buildRequest(spec, p, id, maxTokens, stream)
		if err != nil {
			return nil, err
		}
		withEmptyFinal(req)
		return deterministic.Marshal(req)
	}
	t := c.template(shapeKey{spec, maxTokens, stream})
	if t.err != nil {
		return nil, t.err
	}
	text := ""
	if t.text {
		text = p.Completion()
	}
	return t.appendRequest(make([]byte, 0, t.size(id, text)), id, text), nil
}

// size is the encoded length of the request with id and text.
func (t *template) size(id, text string) int {
	n := len(t.head) + len(t.mid) + len(t.tail)
	if id != "" {
		n += protowire.SizeTag(3) + protowire.SizeBytes(len(id))
	}
	if t.text {
		n += protowire.SizeTag(7) + protowire.SizeBytes(4+len(text))
	}
	return n
}

// appendRequest appends the request with id and text to b.
func (t *template) appendRequest(b []byte, id, text string) []byte {
	b = append(b, t.head...)
	if id != "" {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, id)
	}
	b = append(b, t.mid...)
	if t.text {
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(4+len(text)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(text)))
		b = append(b, text...)
	}
	return append(b, t.tail...)
}

// template returns the shape's template, built when not cached.
func (c *Client) template(k shapeKey) *template {
	c.shapes.mu.Lock()
	t, ok := c.shapes.m[k]
	c.shapes.mu.Unlock()
	if ok {
		return t
	}
	t = c.buildTemplate(k)
	c.shapes.mu.Lock()
	if c.shapes.m == nil || len(c.shapes.m) >= maxTemplates {
		c.shapes.m = map[shapeKey]*template{}
	}
	c.shapes.m[k] = t
	c.shapes.mu.Unlock()
	return t
}

// buildTemplate builds the request of a prompt without text or Params,
// whose id is left to each request.
func (c *Client) buildTemplate(k shapeKey) *template {
	req, err := c.buildRequest(k.spec, &prompts.Prompt{}, "", k.maxTokens, k.stream)
	if err != nil {
		return &template{err: err}
	}
	withEmptyFinal(req)
	t := &template{text: len(req.Inputs) > 0 && req.Inputs[0].GetName() == inText}
	raws := req.RawInputContents
	if t.text {
		raws = raws[1:]
	}
	parts := []struct {
		dst *[]byte
		m   *pb.ModelInferRequest
	}{
		{&t.head, &pb.ModelInferRequest{ModelName: req.ModelName, ModelVersion: req.ModelVersion}},
		{&t.mid, &pb.ModelInferRequest{Parameters: req.Parameters, Inputs: req.Inputs, Outputs: req.Outputs}},
		{&t.tail, &pb.ModelInferRequest{RawInputContents: raws}},
	}
	for _, part := range parts {
		b, err := deterministic.Marshal(part.m)
		if err != nil {
			return &template{err: err}
		}
		*part.dst = b
	}
	return t
}
