package openai

import "testing"

func TestResponseModel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, sent, want string }{
		{`{"id":"x","model":"tiny","choices":[]}`, "", "tiny"},
		{`{"model":"m"}`, "m", "m"},
		{` {"model" : "a\u00e9b"}`, "", "aéb"},
		{`{"choices":[{"model":"inner"}],"object":"chunk"}`, "", ""}, // not top level
		{`{"model":"first","model":"last"}`, "", "last"},             // as a map
		{`{"model":7}`, "", ""},
		{`{"model":null}`, "", ""},
		{`["model","x"]`, "", ""},
		{`{"model":"cut`, "", ""},
		{``, "", ""},
	} {
		if got := responseModel([]byte(tt.in), tt.sent); got != tt.want {
			t.Errorf("responseModel(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestResponseModelSentAllocatesNothing: the usual answer names the model
// that was asked for, and reading it then costs no allocation.
func TestResponseModelSentAllocatesNothing(t *testing.T) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"llama-3-8b","choices":[{"index":0,"delta":{"content":"hi"}}]}`)
	if a := testing.AllocsPerRun(100, func() { _ = responseModel(data, "llama-3-8b") }); a != 0 {
		t.Errorf("%v allocations", a)
	}
}
