// Package field types library errors with the setting they concern, so
// each front end names that setting in its own terms: cmd/tailgate as a
// flag (--model), the canary as a key of its YAML file (model). Library
// code says "model not given"; it never names a flag a YAML user cannot
// pass.
package field

import (
	"fmt"
	"strings"
	"unicode"
)

// Error is an error about one setting.
type Error struct {
	// Field is the setting's Go field name, as in protocol.Target or a
	// command's configuration: "API", "Model", "APIKeyFile".
	Field string
	// Hint is advice that names the setting, "{}" where its name goes
	// ("name one with {}"); "" for none.
	Hint string
	// Err is what is wrong, without the setting's name.
	Err error
}

// Errorf returns an *Error about field whose Err is fmt.Errorf(format,
// args...): %w keeps the chain.
func Errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Err: fmt.Errorf(format, args...)}
}

// WithHint sets e's Hint and returns e.
func (e *Error) WithHint(hint string) *Error {
	e.Hint = hint
	return e
}

// Error names the setting neutrally, in words of its field name:
// "model not given and …", "API key file …".
func (e *Error) Error() string { return e.Text(Words(e.Field)) }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Text is the error with the setting called name: without a Hint, name
// then what is wrong ("--model not given"); with one, what is wrong then
// the hint in parentheses ("… lists no models (name one with --model)").
func (e *Error) Text(name string) string {
	msg := ""
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Hint == "" {
		if msg == "" {
			return name
		}
		return name + " " + msg
	}
	hint := strings.ReplaceAll(e.Hint, "{}", name)
	if msg == "" {
		return hint
	}
	return msg + " (" + hint + ")"
}

// Words is a field name in lower-case words, acronyms kept: "Model" is
// "model", "APIKeyFile" "API key file", "MetricsURL" "metrics URL".
func Words(name string) string {
	r := []rune(name)
	var words []string
	start := 0
	for i := 1; i <= len(r); i++ {
		if i < len(r) && !boundary(r, i) {
			continue
		}
		w := string(r[start:i])
		if !isUpper(w) || len([]rune(w)) == 1 {
			w = strings.ToLower(w)
		}
		words = append(words, w)
		start = i
	}
	return strings.Join(words, " ")
}

// boundary says whether a new word starts at r[i]: a capital after a
// lower-case letter, or a capital followed by a lower-case letter after
// a capital (the K of APIKey).
func boundary(r []rune, i int) bool {
	if !unicode.IsUpper(r[i]) {
		return false
	}
	if !unicode.IsUpper(r[i-1]) {
		return true
	}
	return i+1 < len(r) && unicode.IsLower(r[i+1])
}

func isUpper(s string) bool {
	for _, c := range s {
		if !unicode.IsUpper(c) {
			return false
		}
	}
	return true
}

// Reword is err's text with every *Error in its chain naming its setting
// by name(Field) instead of the neutral words; a field for which name
// returns "" keeps its neutral words. Text that a wrapper scrubbed or reworded
// so that an *Error's own text no longer appears in it stays as it is.
func Reword(err error, name func(field string) string) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	for _, fe := range All(err) {
		n := name(fe.Field)
		if n == "" {
			continue
		}
		msg = strings.Replace(msg, fe.Error(), fe.Text(n), 1)
	}
	return msg
}

// All is every *Error in err's chain, outermost first.
func All(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if fe, ok := err.(*Error); ok { //nolint:errorlint // this walks the chain itself, link by link
			out = append(out, fe)
		}
		switch u := err.(type) { //nolint:errorlint // as above
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}
