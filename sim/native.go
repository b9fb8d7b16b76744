package sim

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// TGI's and Ollama's native APIs, over the same model, engine, faults and
// truth as the other protocols:
//
//	GET  /info              TGI: {"model_id","version"}
//	POST /generate_stream   TGI: data:{"index","token":{…},"generated_text":null,"details":null} per token;
//	                        the last token's event carries generated_text (and details when asked)
//	POST /generate          TGI: {"generated_text"[,"details"]}
//	GET  /api/tags          Ollama: {"models":[{"name","model"}]}
//	POST /api/chat          Ollama: NDJSON {"model","created_at","message":{…},"done":false} per chunk,
//	                        then {"done":true,"done_reason","prompt_eval_count","eval_count",…};
//	                        "stream": false gives the last object alone, with the whole message
//
// Errors before the answer are {"error": …} (TGI adds "error_type") with
// the HTTP status; error_in_stream sends such an object inside the 200
// stream; truncate aborts the connection; malformed sends a line that is
// not JSON.
func (s *Server) nativeRoutes(mux *http.ServeMux) {
	g := s.kserve
	mux.HandleFunc("GET /info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"model_id": s.cfg.Model, "version": "tailgate-sim-" + Version})
	})
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"models": []map[string]string{{"name": s.cfg.Model, "model": s.cfg.Model}}})
	})
	mux.HandleFunc("POST /generate_stream", func(w http.ResponseWriter, r *http.Request) { g.serveTGI(w, r, true) })
	mux.HandleFunc("POST /generate", func(w http.ResponseWriter, r *http.Request) { g.serveTGI(w, r, false) })
	mux.HandleFunc("POST /api/chat", g.serveOllama)
}

// nativeRequest is the inference request a native body stands for.
func (k *kserve) nativeRequest(id, prompt string, stream bool, maxTokens *int) *pb.ModelInferRequest {
	bytesOf := func(s string) []byte { return append(binary.LittleEndian.AppendUint32(nil, uint32(len(s))), s...) }
	req := &pb.ModelInferRequest{ModelName: k.s.cfg.Model, Id: id}
	add := func(name, dt string, raw []byte) {
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: name, Datatype: dt, Shape: []int64{1}})
		req.RawInputContents = append(req.RawInputContents, raw)
	}
	b := byte(0)
	if stream {
		b = 1
	}
	add("text_input", "BYTES", bytesOf(prompt))
	add("stream", "BOOL", []byte{b})
	add("exclude_input_in_output", "BOOL", []byte{1})
	add("return_num_input_tokens", "BOOL", []byte{1})
	if maxTokens != nil {
		add("sampling_parameters", "BYTES", bytesOf(`{"max_tokens":`+strconv.Itoa(*maxTokens)+`}`))
	}
	return req
}

// nativeStream runs q, writing what a makes of it, and answers a
// failure before the stream with errBody's JSON and its HTTP status.
func (k *kserve) nativeStream(w http.ResponseWriter, q *kserveRequest, a *kserveAnswer,
	started *bool, errBody func(msg string) map[string]string) {
	err := k.serve(q, a)
	if err != nil && !*started {
		st := status.Convert(err)
		writeJSON(w, httpStatusOf(st.Code()), errBody(st.Message()))
	}
}

// streamWriter writes a streamed body, its headers first.
type streamWriter struct {
	w       http.ResponseWriter
	ct      string
	started bool
}

func (sw *streamWriter) write(b []byte) error {
	if !sw.started {
		sw.started = true
		sw.w.Header().Set("Content-Type", sw.ct)
		sw.w.WriteHeader(http.StatusOK)
	}
	if _, err := sw.w.Write(b); err != nil {
		return err
	}
	return http.NewResponseController(sw.w).Flush()
}

func (k *kserve) serveTGI(w http.ResponseWriter, r *http.Request, stream bool) {
	arrived := time.Now()
	var body struct {
		Inputs     string `json:"inputs"`
		Parameters struct {
			MaxNewTokens *int `json:"max_new_tokens"`
			Details      bool `json:"details"`
		} `json:"parameters"`
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	tgiErr := func(msg string) map[string]string { return map[string]string{"error": msg, "error_type": "validation"} }
	if err := json.Unmarshal(raw, &body); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, tgiErr("Failed to deserialize the JSON body: "+err.Error()))
		return
	}
	q, err := k.begin(r.Context(), r.Header.Get, r.URL.Path, k.nativeRequest(r.Header.Get("X-Request-Id"), body.Inputs, stream, body.Parameters.MaxNewTokens), arrived)
	if err != nil {
		st := status.Convert(err)
		writeJSON(w, httpStatusOf(st.Code()), tgiErr(st.Message()))
		return
	}
	details := func(b []byte) []byte {
		if !body.Parameters.Details {
			return append(b, "null"...)
		}
		b = append(b, `{"finish_reason":"length","generated_tokens":`...)
		b = strconv.AppendInt(b, int64(q.sent), 10)
		b = append(b, `,"seed":null,"input_length":`...)
		b = strconv.AppendInt(b, int64(q.prompt), 10)
		return append(b, '}')
	}
	if !stream {
		if err := k.serve(q, &kserveAnswer{}); err != nil {
			st := status.Convert(err)
			writeJSON(w, httpStatusOf(st.Code()), map[string]string{"error": st.Message(), "error_type": "generation"})
			return
		}
		b := appendJSONString([]byte(`{"generated_text":`), string(answerText(q.sent)))
		b = append(details(append(b, `,"details":`...)), '}')
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
		return
	}
	sw := &streamWriter{w: w, ct: "text/event-stream"}
	var full []byte
	index := 0
	a := &kserveAnswer{
		respond: func(text []byte, tokens int, final bool) error {
			// One event per token: the chunk's words (each with its
			// leading space), one at a time.
			words := strings.Split(string(text), " ")[1:]
			var b []byte
			for i, word := range words {
				word = " " + word
				index++
				full = append(full, word...)
				b = append(b, `data:{"index":`...)
				b = strconv.AppendInt(b, int64(index), 10)
				b = append(b, `,"token":{"id":`...)
				b = strconv.AppendInt(b, int64(1000+index%16), 10)
				b = append(b, `,"text":`...)
				b = appendJSONString(b, word)
				b = append(b, `,"logprob":-0.1,"special":false},"generated_text":`...)
				if final && i == len(words)-1 {
					b = appendJSONString(b, string(full))
					b = append(b, `,"details":`...)
					b = details(b)
				} else {
					b = append(b, `null,"details":null`...)
				}
				b = append(b, "}\n\n"...)
			}
			return sw.write(b)
		},
		errorMessage: func(msg string) error {
			return sw.write(append(appendJSONString([]byte(`data:{"error":`), msg), `,"error_type":"generation"}`+"\n\n"...))
		},
		malformed: func() error { return sw.write([]byte("data:{\"index\":\n\n")) },
		truncate:  func() { sw.write(nil); panic(http.ErrAbortHandler) },
	}
	k.nativeStream(w, q, a, &sw.started, tgiErr)
}

func (k *kserve) serveOllama(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		Stream  *bool `json:"stream"`
		Options struct {
			NumPredict *int `json:"num_predict"`
		} `json:"options"`
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	olErr := func(msg string) map[string]string { return map[string]string{"error": msg} }
	if err := json.Unmarshal(raw, &body); err != nil {
		writeJSON(w, http.StatusBadRequest, olErr(err.Error()))
		return
	}
	s := k.s
	if body.Model != s.cfg.Model && body.Model != s.cfg.Model+":latest" {
		writeJSON(w, http.StatusNotFound, olErr(`model "`+body.Model+`" not found, try pulling it first`))
		return
	}
	stream := body.Stream == nil || *body.Stream
	var prompt []string
	for _, m := range body.Messages {
		prompt = append(prompt, m.Content)
	}
	// Ollama's EOS (Config.EOSNotStreamed): the last of num_predict
	// tokens is an end-of-sequence token, counted in eval_count, never
	// sent; done_reason "stop".
	eos := s.cfg.EOSNotStreamed
	predict := body.Options.NumPredict
	if eos {
		n := s.cfg.DefaultMaxTokens
		if predict != nil {
			n = *predict
		}
		if n <= 1 {
			// The EOS is the first token: an empty answer, at once.
			ollamaEmpty(w, s, stream, arrived)
			return
		}
		n--
		predict = &n
	}
	q, err := k.begin(r.Context(), r.Header.Get, r.URL.Path, k.nativeRequest(r.Header.Get("X-Request-Id"), strings.Join(prompt, "\n"), stream, predict), arrived)
	if err != nil {
		st := status.Convert(err)
		writeJSON(w, httpStatusOf(st.Code()), olErr(st.Message()))
		return
	}
	head := func(b []byte) []byte {
		b = append(b, `{"model":`...)
		b = append(b, s.modelJSON...)
		b = append(b, `,"created_at":"`...)
		b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, `","message":{"role":"assistant","content":`...)
	}
	last := func(b []byte, text []byte) []byte {
		reason, evals := "length", q.sent
		if eos {
			reason, evals = "stop", q.sent+1
		}
		// Ollama's timings: load (the model is loaded: a lookup), prompt
		// evaluation from admission to the first token, evaluation from
		// there to now; the total less those is the queue wait.
		now := time.Now()
		first, admitted := q.first, q.admitted
		if admitted.IsZero() {
			admitted = q.arrived
		}
		if first.IsZero() || first.Before(admitted) {
			first = admitted
		}
		const load = 50 * time.Microsecond
		b = appendJSONString(head(b), string(text))
		b = append(b, `},"done":true,"done_reason":"`...)
		b = append(b, reason...)
		b = append(b, `","total_duration":`...)
		b = strconv.AppendInt(b, int64(now.Sub(q.arrived)+load), 10)
		b = append(b, `,"load_duration":`...)
		b = strconv.AppendInt(b, int64(load), 10)
		b = append(b, `,"prompt_eval_count":`...)
		b = strconv.AppendInt(b, int64(q.prompt), 10)
		b = append(b, `,"prompt_eval_duration":`...)
		b = strconv.AppendInt(b, int64(max(first.Sub(admitted), time.Microsecond)), 10)
		b = append(b, `,"eval_count":`...)
		b = strconv.AppendInt(b, int64(evals), 10)
		b = append(b, `,"eval_duration":`...)
		b = strconv.AppendInt(b, int64(max(now.Sub(first), time.Microsecond)), 10)
		return append(b, "}\n"...)
	}
	if !stream {
		if err := k.serve(q, &kserveAnswer{}); err != nil {
			st := status.Convert(err)
			writeJSON(w, httpStatusOf(st.Code()), olErr(st.Message()))
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Write(last(nil, answerText(q.sent)))
		return
	}
	sw := &streamWriter{w: w, ct: "application/x-ndjson"}
	a := &kserveAnswer{
		respond: func(text []byte, tokens int, final bool) error {
			b := appendJSONString(head(nil), string(text))
			b = append(b, "},\"done\":false}\n"...)
			if final {
				b = last(b, nil)
			}
			return sw.write(b)
		},
		errorMessage: func(msg string) error { return sw.write(append(appendJSONString([]byte(`{"error":`), msg), "}\n"...)) },
		malformed:    func() error { return sw.write([]byte("{\"model\":\n")) },
		truncate:     func() { sw.write(nil); panic(http.ErrAbortHandler) },
	}
	k.nativeStream(w, q, a, &sw.started, olErr)
}

// ollamaEmpty answers as Ollama does when the model's first token is its
// end-of-sequence token: no content, done_reason "stop", eval_count 1.
func ollamaEmpty(w http.ResponseWriter, s *Server, stream bool, arrived time.Time) {
	total := time.Since(arrived)
	o := map[string]any{"model": s.cfg.Model, "created_at": time.Now().UTC().Format(time.RFC3339Nano),
		"message": map[string]string{"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
		"total_duration": total.Nanoseconds() + 3000, "load_duration": 1000, "prompt_eval_count": 1,
		"prompt_eval_duration": 1000, "eval_count": 1, "eval_duration": 1000}
	ct := "application/json; charset=utf-8"
	if stream {
		ct = "application/x-ndjson"
	}
	b, _ := json.Marshal(o)
	w.Header().Set("Content-Type", ct)
	w.Write(append(b, '\n'))
}
