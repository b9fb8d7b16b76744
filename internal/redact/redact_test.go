package redact

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://user:SECRET@host:8000/v1":          "http://host:8000/v1",
		"https://host/v1?api_key=SECRET":           "https://host/v1?" + Mask,
		"https://host/v1?api_key=SECRET#frag":      "https://host/v1?" + Mask,
		"http://127.0.0.1:8000":                    "http://127.0.0.1:8000",
		"not a url":                                "not a url",
		"http://user:SE CRET@host:bad port/?k=x%%": Mask,
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	in := `Get "http://user:SECRET@127.0.0.1:9/v1/models?key=SECRET2": dial tcp: refused; key sk-LIT`
	got := Text(in, "sk-LIT")
	for _, s := range []string{"SECRET", "SECRET2", "sk-LIT"} {
		if strings.Contains(got, s) {
			t.Errorf("Text left %q in %q", s, got)
		}
	}
	if !strings.Contains(got, "http://127.0.0.1:9/v1/models?") || !strings.Contains(got, "dial tcp: refused") {
		t.Errorf("Text lost the message: %q", got)
	}
	// A URL's password also given as a literal secret: the URL keeps its
	// host and path rather than being masked whole.
	in = `GET http://user:pw-SECRET@127.0.0.1:9/v1/models: refused`
	if got, want := Text(in, "pw-SECRET"), `GET http://127.0.0.1:9/v1/models: refused`; got != want {
		t.Errorf("Text(%q) = %q, want %q", in, got, want)
	}
}

func TestArgs(t *testing.T) {
	t.Parallel()
	in := []string{"tailgate", "run", "--api-key", "sk-123", "--api-key=sk-456", "-H", "Authorization: Bearer abc",
		"--header=X-Api-Key: k", "--header", "X-Trace: 1", "-HX-Auth-Token: t", "--max-tokens", "128",
		"--target", "http://user:pw@host:8000/v1", "--tokenizer=cl100k", "--token", "t0k", "--password=p",
		"--dcgm-url=http://gpu:9400/metrics?token=T"}
	want := []string{"tailgate", "run", "--api-key", Mask, "--api-key=" + Mask, "-H", "Authorization: " + Mask,
		"--header=X-Api-Key: " + Mask, "--header", "X-Trace: 1", "-HX-Auth-Token: " + Mask, "--max-tokens", "128",
		"--target", "http://host:8000/v1", "--tokenizer=cl100k", "--token", Mask, "--password=" + Mask,
		"--dcgm-url=http://gpu:9400/metrics?" + Mask}
	if got := Args(in); !reflect.DeepEqual(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("arg %d: %q, want %q", i, got[i], want[i])
			}
		}
	}
	if in[3] != "sk-123" {
		t.Fatal("Args changed its input")
	}
}

// A scrubbed error says only its scrubbed words and still answers
// errors.Is and errors.As for every cause it was built from.
func TestErrorKeepsChain(t *testing.T) {
	t.Parallel()
	cause := &url.Error{Op: "Get", URL: "http://u:SECRET@h/?key=SECRET", Err: context.DeadlineExceeded}
	err := Wrap(Text(cause.Error()), cause, nil, context.Canceled)
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("a secret in %q", err)
	}
	wrapped := fmt.Errorf("preflight: %w", err)
	if !errors.Is(wrapped, context.DeadlineExceeded) || !errors.Is(wrapped, context.Canceled) {
		t.Errorf("the chain is lost: %v", wrapped)
	}
	var ue *url.Error
	if !errors.As(wrapped, &ue) || ue != cause {
		t.Errorf("errors.As does not reach the *url.Error")
	}
	if strings.Contains(wrapped.Error(), "SECRET") {
		t.Errorf("a secret in %q", wrapped)
	}
}
