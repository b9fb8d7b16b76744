package field

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/redact"
)

func TestWords(t *testing.T) {
	for in, want := range map[string]string{
		"Model": "model", "API": "API", "APIKeyFile": "API key file", "MetricsURL": "metrics URL",
		"ServerModel": "server model", "SLO": "SLO", "Headers": "headers", "X": "x",
	} {
		if got := Words(in); got != want {
			t.Errorf("Words(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorNeutralAndChain(t *testing.T) {
	e := Errorf("Model", "not given and %w", context.DeadlineExceeded)
	if got, want := e.Error(), "model not given and context deadline exceeded"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("target x: %w", e)
	if !errors.Is(wrapped, context.DeadlineExceeded) {
		t.Error("errors.Is lost context.DeadlineExceeded through *Error")
	}
	var fe *Error
	if !errors.As(wrapped, &fe) || fe.Field != "Model" {
		t.Errorf("errors.As found %+v", fe)
	}
	h := &Error{Field: "Force", Hint: "{} to replace them", Err: errors.New("out already holds results")}
	if got, want := h.Error(), "out already holds results (force to replace them)"; got != want {
		t.Errorf("hinted Error() = %q, want %q", got, want)
	}
}

func flag(f string) string {
	return map[string]string{"Model": "--model", "Force": "--force", "Headers": "--header"}[f]
}

func TestReword(t *testing.T) {
	inner := Errorf("Model", "not given")
	outer := &Error{Field: "Force", Hint: "{} to replace them", Err: fmt.Errorf("first: %w", inner)}
	err := fmt.Errorf("run: %w", outer)
	if got, want := Reword(err, flag), "run: first: --model not given (--force to replace them)"; got != want {
		t.Errorf("Reword = %q, want %q", got, want)
	}
	// An unknown field keeps its neutral words; nil is "".
	if got, want := Reword(Errorf("Shard", "bad"), flag), "shard bad"; got != want {
		t.Errorf("Reword(unmapped) = %q, want %q", got, want)
	}
	if Reword(nil, flag) != "" {
		t.Error("Reword(nil) is not empty")
	}
	// Through a joined error and a scrubbed redact.Error, both walked.
	j := errors.Join(errors.New("a"), Errorf("Headers", "x"))
	if got, want := Reword(j, flag), "a\n--header x"; got != want {
		t.Errorf("Reword(joined) = %q, want %q", got, want)
	}
}

// A credential the wrapper scrubbed does not come back when the setting
// is renamed: Reword works on the scrubbed text.
func TestRewordKeepsScrubbing(t *testing.T) {
	const key = "sk-secret-1234"
	fe := Errorf("Model", "not given: POST http://u:%s@h/v1: refused", key)
	scrubbed := redact.Wrap(redact.Text(fe.Error(), key), fe)
	got := Reword(scrubbed, flag)
	if want := redact.Text(fe.Error(), key); got != want {
		t.Errorf("Reword = %q, want the scrubbed text %q", got, want)
	}
	if strings.Contains(got, key) {
		t.Errorf("Reword brought the credential back: %q", got)
	}
}
