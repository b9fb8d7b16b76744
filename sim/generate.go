package sim

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// Triton's HTTP side: the KServe v2 health and metadata endpoints and the
// generate extension, over the same model, engine, faults and truth as the
// gRPC service:
//
//	GET  /v2/health/live, /v2/health/ready       200
//	GET  /v2                                      {"name","version","extensions"}
//	GET  /v2/models/{model}[/versions/{v}]        metadata JSON (400 for another model)
//	GET  /v2/models/{model}[/versions/{v}]/ready  200, or 400 for another model
//	POST /v2/repository/index                     [{"name","version","state":"READY"}]
//	POST /v2/models/{model}[/versions/{v}]/generate         one JSON answer
//	POST /v2/models/{model}[/versions/{v}]/generate_stream  SSE, one event per chunk, no [DONE]
//
// A generate request is {"text_input": …, "parameters": {…}, …}: other keys
// fill the model's input tensors of those names (stream,
// exclude_input_in_output, return_num_input_tokens,
// return_num_output_tokens, sampling_parameters) and parameters.max_tokens
// (else sampling_parameters' max_tokens) caps the answer. An event is
// {"model_name","model_version","text_output"[,"num_input_tokens"][,"num_output_tokens"]}.
// An error before the answer is {"error": …} with its HTTP status (400,
// 429 for http_429, 503 for http_503); error_in_stream sends
// data: {"error": …} inside the 200 stream, as Triton does; truncate aborts
// the connection after half the chunks; malformed sends an event that is
// not JSON.
func (s *Server) generateRoutes(mux *http.ServeMux) {
	g := s.kserve // Triton's series appear with the first request
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	mux.HandleFunc("GET /v2/health/live", ok)
	mux.HandleFunc("GET /v2/health/ready", ok)
	mux.HandleFunc("GET /v2", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"name": "tailgate-sim", "version": Version, "extensions": []string{"generate"}})
	})
	mux.HandleFunc("POST /v2/repository/index", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, []map[string]string{{"name": s.cfg.Model, "version": "1", "state": "READY"}})
	})
	meta := func(w http.ResponseWriter, r *http.Request) {
		if !g.known(r.PathValue("model"), r.PathValue("version")) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": status.Convert(unknownModel(r.PathValue("model"))).Message()})
			return
		}
		tensors := func(ts []*pb.ModelMetadataResponse_TensorMetadata) []map[string]any {
			out := make([]map[string]any, 0, len(ts))
			for _, t := range ts {
				out = append(out, map[string]any{"name": t.Name, "datatype": t.Datatype, "shape": t.Shape})
			}
			return out
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": s.cfg.Model, "versions": []string{"1"}, "platform": "vllm",
			"inputs": tensors(simInputs), "outputs": tensors(simOutputs)})
	}
	ready := func(w http.ResponseWriter, r *http.Request) {
		if !g.known(r.PathValue("model"), r.PathValue("version")) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": status.Convert(unknownModel(r.PathValue("model"))).Message()})
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	for _, prefix := range []string{"/v2/models/{model}", "/v2/models/{model}/versions/{version}"} {
		mux.HandleFunc("GET "+prefix, meta)
		mux.HandleFunc("GET "+prefix+"/ready", ready)
		mux.HandleFunc("POST "+prefix+"/generate", func(w http.ResponseWriter, r *http.Request) { g.serveGenerate(w, r, false) })
		mux.HandleFunc("POST "+prefix+"/generate_stream", func(w http.ResponseWriter, r *http.Request) { g.serveGenerate(w, r, true) })
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// httpStatusOf is the HTTP status Triton answers a failed request with.
func httpStatusOf(c codes.Code) int {
	switch c {
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.OutOfRange, codes.AlreadyExists:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// generateRequest turns a generate body into the inference request it
// stands for: each key an input tensor, parameters merged into
// sampling_parameters.
func (k *kserve) generateRequest(model, id string, body []byte) (*pb.ModelInferRequest, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "failed to parse the request JSON buffer: %v", err)
	}
	req := &pb.ModelInferRequest{ModelName: model, Id: id}
	sampling := map[string]any{}
	if raw, ok := m["parameters"]; ok {
		if err := json.Unmarshal(raw, &sampling); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "parameters: want an object: %v", err)
		}
		delete(m, "parameters")
	}
	if raw, ok := m["sampling_parameters"]; ok {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, status.Error(codes.InvalidArgument, "sampling_parameters: want a JSON string")
		}
		var sp map[string]any
		if err := json.Unmarshal([]byte(str), &sp); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "sampling_parameters: %v", err)
		}
		for k, v := range sp {
			if _, set := sampling[k]; !set {
				sampling[k] = v
			}
		}
		delete(m, "sampling_parameters")
	}
	if v, ok := sampling["stream"]; ok { // the vLLM backend reads stream from parameters too
		if _, set := m["stream"]; !set {
			b, _ := json.Marshal(v)
			m["stream"] = b
		}
		delete(sampling, "stream")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v any
		if err := json.Unmarshal(m[k], &v); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: %v", k, err)
		}
		var raw []byte
		dt := "BYTES"
		switch x := v.(type) {
		case string:
			raw = binary.LittleEndian.AppendUint32(nil, uint32(len(x)))
			raw = append(raw, x...)
		case bool:
			dt, raw = "BOOL", []byte{0}
			if x {
				raw[0] = 1
			}
		default:
			// Triton's words for an input of a type the model does not take.
			return nil, status.Errorf(codes.InvalidArgument, "parameter '%s' has invalid type", k)
		}
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: k, Datatype: dt, Shape: []int64{1}})
		req.RawInputContents = append(req.RawInputContents, raw)
	}
	if len(sampling) > 0 {
		b, _ := json.Marshal(sampling)
		raw := binary.LittleEndian.AppendUint32(nil, uint32(len(b)))
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: "sampling_parameters", Datatype: "BYTES", Shape: []int64{1}})
		req.RawInputContents = append(req.RawInputContents, append(raw, b...))
	}
	return req, nil
}

func (k *kserve) serveGenerate(w http.ResponseWriter, r *http.Request, stream bool) {
	arrived := time.Now()
	s := k.s
	h := w.Header()
	id := r.Header.Get("X-Request-Id")
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return
	}
	fail := func(err error) {
		st := status.Convert(err)
		writeJSON(w, httpStatusOf(st.Code()), map[string]string{"error": st.Message()})
	}
	if len(body) > maxBodyBytes {
		fail(status.Error(codes.InvalidArgument, "request body too large"))
		return
	}
	req, err := k.generateRequest(r.PathValue("model"), id, body)
	if err == nil {
		req.ModelVersion = r.PathValue("version")
	}
	var q *kserveRequest
	if err == nil {
		q, err = k.begin(r.Context(), r.Header.Get, r.URL.Path, req, arrived)
	}
	if err != nil {
		fail(err)
		return
	}
	if !stream && q.stream {
		q.rec.update(func(t *Truth) { t.Outcome = "error"; t.Status = http.StatusBadRequest })
		s.truth.finish(q.rec, time.Now())
		fail(status.Error(codes.InvalidArgument, "generate expects model to produce exactly 1 response"))
		return
	}
	if id != "" {
		h.Set("X-Request-Id", id)
	}
	started := false
	var buf []byte
	begin := func() {
		if !started {
			started = true
			h.Set("Content-Type", "text/event-stream; charset=utf-8")
			h.Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
		}
	}
	write := func(b []byte) error {
		begin()
		if _, err := w.Write(b); err != nil {
			return err
		}
		return http.NewResponseController(w).Flush()
	}
	event := func(b []byte, text []byte, tokens int) []byte {
		b = append(b, `{"model_name":`...)
		b = append(b, s.modelJSON...)
		b = append(b, `,"model_version":"1","text_output":`...)
		b = appendJSONString(b, string(text))
		if q.wantIn {
			b = append(b, `,"num_input_tokens":`...)
			b = strconv.AppendInt(b, int64(q.prompt), 10)
		}
		if q.wantOut {
			b = append(b, `,"num_output_tokens":`...)
			b = strconv.AppendInt(b, int64(tokens), 10)
		}
		return append(b, '}')
	}
	a := &kserveAnswer{}
	if stream && q.stream {
		a = &kserveAnswer{
			respond: func(text []byte, tokens int, final bool) error {
				buf = append(append(buf[:0], "data: "...), event(nil, text, tokens)...)
				return write(append(buf, "\n\n"...))
			},
			errorMessage: func(msg string) error {
				return write(append(appendJSONString([]byte(`data: {"error":`), msg), "}\n\n"...))
			},
			malformed: func() error { return write([]byte("data: {\"text_output\":\n\n")) },
			// No terminating chunk: the client sees the body cut.
			truncate: func() { write(nil); panic(http.ErrAbortHandler) },
		}
	}
	// A model asked not to stream answers once, at the end.
	err = k.serve(q, a)
	switch {
	case err != nil && !started:
		fail(err)
	case err != nil:
	case a.respond == nil && stream:
		write(append(append([]byte("data: "), event(nil, answerText(q.sent), q.sent)...), "\n\n"...))
	case a.respond == nil:
		b := event(nil, q.prompted(answerText(q.sent)), q.sent)
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b)
	}
}
