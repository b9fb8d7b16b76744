package protocol

import (
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	for _, name := range Names() {
		c, err := New(Target{URL: "http://127.0.0.1:1", API: name, Model: "m", Stream: true})
		if err != nil || c == nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(Target{URL: "http://127.0.0.1:1", API: "triton-http"}); err == nil || !strings.Contains(err.Error(), "openai-chat") {
		t.Errorf("unknown api: %v", err)
	}
}
