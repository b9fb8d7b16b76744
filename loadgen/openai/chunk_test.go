package openai

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen/sse"
)

func TestDecodeEvent(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want event
		text string
	}{
		{"role only", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			event{choices: 1}, ""},
		{"content null (llama.cpp)", `{"choices":[{"delta":{"role":"assistant","content":null}}]}`,
			event{choices: 1}, ""},
		{"content", `{"choices":[{"delta":{"content":"Hi\n\"x\" \u00e9\ud83d\ude00"}}]}`,
			event{choices: 1, answer: true}, "Hi\n\"x\" é😀"},
		{"reasoning (vLLM)", `{"choices":[{"delta":{"reasoning":"hmm"}}]}`,
			event{choices: 1, reasoning: true}, ""},
		{"reasoning_content null beside content (SGLang)", `{"choices":[{"delta":{"role":null,"content":"提供","reasoning_content":null}}]}`,
			event{choices: 1, answer: true}, "提供"},
		{"completions text", `{"choices":[{"text":" top","finish_reason":null}]}`,
			event{choices: 1, answer: true}, " top"},
		{"non-streamed message", `{"choices":[{"message":{"role":"assistant","content":"ok","reasoning_content":"r"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
			event{choices: 1, answer: true, reasoning: true, finish: "length", usage: true, promptTokens: 3, completionTokens: 2}, "ok"},
		{"tool calls", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`,
			event{choices: 1, answer: true}, ""},
		{"empty tool calls", `{"choices":[{"delta":{"tool_calls":[ ]}}]}`, event{choices: 1}, ""},
		{"finish empty string (TGI completions)", `{"choices":[{"text":"a","finish_reason":""}]}`,
			event{choices: 1, answer: true}, "a"},
		{"usage chunk", `{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`,
			event{usage: true, promptTokens: 9, completionTokens: 1}, ""},
		{"choices null", `{"choices":null,"usage":{"completion_tokens":4}}`,
			event{usage: true, promptTokens: -1, completionTokens: 4}, ""},
		{"no choices key", `{"usage":{"prompt_tokens":0,"completion_tokens":0}}`,
			event{usage: true}, ""},
		{"odd counts ignored", `{"usage":{"prompt_tokens":1.5,"completion_tokens":"3"}}`,
			event{usage: true, promptTokens: -1, completionTokens: -1}, ""},
		{"timings", `{"choices":[{"delta":{"reasoning_content":" w"}}],"timings":{"prompt_n":10,"predicted_n":8}}`,
			event{choices: 1, reasoning: true, predictedTokens: 8}, ""},
		{"timings with times", `{"choices":[],"timings":{"prompt_n":10,"prompt_ms":1.25,"predicted_n":8,"predicted_ms":96.5e0,"predicted_per_token_ms":12.06}}`,
			event{predictedTokens: 8, promptMs: 1.25, predictedMs: 96.5}, ""},
		{"timings odd times ignored", `{"timings":{"prompt_ms":"1","predicted_ms":-2}}`, event{}, ""},
		{"error object", `{"error": {"message": "boom", "type": "BadRequestError", "param": null, "code": 400}}`,
			event{isError: true, errMessage: "boom", errCode: "400"}, ""},
		{"error string (TGI native)", `{"error":"Input validation error","error_type":"validation"}`,
			event{isError: true, errMessage: "Input validation error"}, ""},
		{"error http_status_code (TGI chat)", `{"error":{"message":"bad","http_status_code":422}}`,
			event{isError: true, errMessage: "bad", errCode: "422"}, ""},
		{"error null is no error", `{"error":null,"choices":[{"delta":{"content":"a"}}]}`,
			event{choices: 1, answer: true}, "a"},
		{"two choices", `{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"},"finish_reason":"stop"}]}`,
			event{choices: 2, answer: true, finish: "stop"}, "ab"},
		{"duplicate key: last wins", `{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":""}}]}`,
			event{choices: 1}, ""},
		{"escaped key goes to fallback", `{"ch\u006fices":[{"delta":{"content":"a"}}]}`,
			event{choices: 1, answer: true}, "a"},
		{"invalid UTF-8 coerced", "{\"choices\":[{\"delta\":{\"content\":\"a\xffb\"}}]}",
			event{choices: 1, answer: true}, "a\ufffdb"},
		{"lone surrogate", `{"choices":[{"delta":{"content":"\ud800x"}}]}`,
			event{choices: 1, answer: true}, "\ufffdx"},
		{"trailing space (TRT-LLM)", `{"choices":[{"delta":{"role":"assistant"}}]}  `,
			event{choices: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if !want.usage {
				want.promptTokens, want.completionTokens = -1, -1
			}
			if want.predictedTokens == 0 {
				want.predictedTokens = -1
			}
			if want.promptMs == 0 {
				want.promptMs = -1
			}
			if want.predictedMs == 0 {
				want.predictedMs = -1
			}
			for _, dec := range decoders {
				var ev event
				text, err := dec.fn([]byte(tt.in), &ev, []byte("prefix:"), true)
				if err != nil {
					if dec.name == "fast" && errors.Is(err, errFallback) {
						continue
					}
					t.Fatalf("%s: %v", dec.name, err)
				}
				if ev != want {
					t.Errorf("%s: got %+v\nwant %+v", dec.name, ev, want)
				}
				if string(text) != "prefix:"+tt.text {
					t.Errorf("%s: text %q, want %q", dec.name, text, "prefix:"+tt.text)
				}
			}
		})
	}
}

var decoders = []struct {
	name string
	fn   func([]byte, *event, []byte, bool) ([]byte, error)
}{
	{"fast", decodeFast},
	{"slow", decodeSlow},
	{"decodeEvent", decodeEvent},
}

func TestDecodeEventInvalid(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, `[1]`, `"s"`, `null`, `{"a":01}`,
		`{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":tru}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`,
		`{"choices":[{"delta":{"content":"a}}]}`, `{"a":"\u12"}`, `{'a':1}`,
	} {
		for _, dec := range decoders {
			var ev event
			if _, err := dec.fn([]byte(in), &ev, nil, true); err == nil {
				t.Errorf("%s(%q): no error", dec.name, in)
			}
		}
	}
}

// Deep nesting is beyond the fast path; the fallback still decides.
func TestDecodeEventDeep(t *testing.T) {
	deep := `{"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `,"choices":[{"delta":{"content":"a"}}]}`
	var ev event
	if _, err := decodeFast([]byte(deep), &ev, nil, false); !errors.Is(err, errFallback) {
		t.Fatalf("fast path: err = %v, want errFallback", err)
	}
	if _, err := decodeEvent([]byte(deep), &ev, nil, false); err != nil || !ev.answer {
		t.Fatalf("decodeEvent: err=%v answer=%v", err, ev.answer)
	}
}

func TestAppendUnquotedMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`plain`, `a\nb\tc\"d\\e\/f\bg\fh\ri`, `\u0041\u00e9\u4e2d`, `\ud83d\ude00`, `\ud83d`, `\ude00`,
		`\ud83d\u0041`, `\ud83dx`, "caf\xc3\xa9", "bad\xc3", "\xff\xfe", `\u0000`,
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+s+`"`), &want); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := string(appendUnquoted(nil, []byte(s))); got != want {
			t.Errorf("appendUnquoted(%q) = %q, encoding/json %q", s, got, want)
		}
	}
}

// FuzzDecodeChunk holds the fast decoder to the reference: whatever the
// fast path accepts, encoding/json must accept and read the same way;
// whatever it rejects as malformed, encoding/json must reject.
func FuzzDecodeChunk(f *testing.F) {
	for _, stream := range seedStreams(f) {
		s := sse.NewScanner(bytes.NewReader(stream))
		for s.Next() {
			f.Add(bytes.Clone(s.Data()))
		}
	}
	for i, in := range swarBoundaryChunks() {
		if i%4 == (i/4)%4 { // one of the four forms of each string, in turn
			f.Add(in)
		}
	}
	f.Add([]byte(`{"choices":[{"delta":{"content":"\ud83d\ude00","reasoning":"x","tool_calls":[1]},"message":{"content":"m"},"text":"t","finish_reason":"st\u006fp"}],"usage":{"prompt_tokens":1,"completion_tokens":2},"timings":{"predicted_n":3},"error":{"message":"m","code":"c","http_status_code":5}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkDecoders(t, in)
	})
}

func checkDecoders(t *testing.T, in []byte) {
	t.Helper()
	var fast, slow, both event
	fastText, fastErr := decodeFast(in, &fast, []byte("p"), true)
	slowText, slowErr := decodeSlow(in, &slow, []byte("p"), true)
	bothText, bothErr := decodeEvent(in, &both, []byte("p"), true)
	if (bothErr == nil) != (slowErr == nil) || both != slow || string(bothText) != string(slowText) {
		t.Fatalf("decodeEvent differs from the reference on %q:\n%+v %q %v\n%+v %q %v",
			in, both, bothText, bothErr, slow, slowText, slowErr)
	}
	switch {
	case fastErr == nil:
		if slowErr != nil {
			t.Fatalf("fast path accepted %q, encoding/json: %v", in, slowErr)
		}
		if fast != slow || string(fastText) != string(slowText) {
			t.Fatalf("fast and reference differ on %q:\nfast %+v %q\nref  %+v %q", in, fast, fastText, slow, slowText)
		}
	case errors.Is(fastErr, errFallback):
	default:
		if slowErr == nil {
			t.Fatalf("fast path rejected valid %q: %v", in, fastErr)
		}
	}
	// Without keepText nothing is appended.
	var ev event
	if out, err := decodeEvent(in, &ev, nil, false); len(out) != 0 || (err == nil) != (slowErr == nil) {
		t.Fatalf("keepText=false appended %q (err %v)", out, err)
	}
}

func TestDecodeSeedStreams(t *testing.T) {
	for _, stream := range seedStreams(t) {
		s := sse.NewScanner(bytes.NewReader(stream))
		for s.Next() {
			checkDecoders(t, s.Data())
		}
	}
	b, err := os.ReadFile("testdata/llamacpp_l4_error_legacy.txt")
	if err != nil {
		t.Fatal(err)
	}
	checkDecoders(t, bytes.TrimPrefix(bytes.TrimSpace(b), []byte("error: ")))
}

// swarBoundaryChunks are chunks whose strings (a key, the content, a
// skipped value, a number) are 7, 8, 9, 15, 16 or 17 bytes long with one
// byte str must stop at (quote, backslash, control, high, invalid UTF-8)
// or must not (DEL, '/') at each position: the edges of the 8-byte steps.
func swarBoundaryChunks() [][]byte {
	specials := []string{"\"", "\\", "\\n", "\\u00e9", "\\x", "\x00", "\x1f", "\x7f", "\x80", "\xc3\xa9", "\xff", "\xe2\x82", "/", " "}
	var out [][]byte
	for _, n := range []int{7, 8, 9, 15, 16, 17} {
		for _, sp := range specials {
			for at := 0; at < n; at++ {
				s := strings.Repeat("a", at) + sp + strings.Repeat("b", max(0, n-at-1))
				out = append(out,
					[]byte(`{"choices":[{"delta":{"content":"`+s+`"}}]}`),
					[]byte(`{"`+s+`":1,"choices":[{"text":"x"}]}`),
					[]byte(`{"id":"`+s+`","choices":[{"delta":{"content":"x"},"finish_reason":"`+s+`"}]}`),
					[]byte(`{"usage":{"completion_tokens":`+strings.Repeat("1", at+1)+sp+`}}`),
				)
			}
		}
	}
	return out
}

func TestDecodeSWARBoundaries(t *testing.T) {
	for _, in := range swarBoundaryChunks() {
		checkDecoders(t, in)
		// The same chunk ending right after the string: the scan's
		// last 8-byte step meets the end of the input.
		if i := bytes.LastIndexByte(in, '"'); i > 0 {
			checkDecoders(t, in[:i+1])
			checkDecoders(t, in[:i])
		}
	}
}

// TestSpecialFirstByte holds the SWAR masks to a byte-by-byte scan: the
// lowest flagged byte is the first byte str must look at.
func TestSpecialFirstByte(t *testing.T) {
	first := func(w [8]byte, high bool) int {
		for i, c := range w {
			if c == '"' || c == '\\' || c < 0x20 || (high && c >= 0x80) {
				return i
			}
		}
		return 8
	}
	check := func(w [8]byte) {
		t.Helper()
		x := binary.LittleEndian.Uint64(w[:])
		if got, want := bits.TrailingZeros64(special(x, swarHigh))>>3, first(w, true); got != want {
			t.Fatalf("special(%q, high) first at %d, want %d", w, got, want)
		}
		if got, want := bits.TrailingZeros64(specialASCII(x))>>3, first(w, true); got != want {
			t.Fatalf("specialASCII(%q) first at %d, want %d", w, got, want)
		}
		if got, want := bits.TrailingZeros64(special(x, 0))>>3, first(w, false); got != want {
			t.Fatalf("special(%q, 0) first at %d, want %d", w, got, want)
		}
	}
	// Every byte value at every position, over fillers that borrow
	// differently (0x20 and 0x01 sit next to the subtracted constants).
	for _, fill := range []byte{'a', 0x20, 0x21, 0x23, 0x5d, 0x7f, 0x80, 0xa0, 0xff} {
		for pos := 0; pos < 8; pos++ {
			for c := 0; c < 256; c++ {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		check(w)
	}
}

func TestAllDigits(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			w := []byte("12345678")
			w[pos] = byte(c)
			want := '0' <= c && c <= '9'
			if got := allDigits(binary.LittleEndian.Uint64(w)); got != want {
				t.Fatalf("allDigits(%q) = %v", w, got)
			}
		}
	}
}
