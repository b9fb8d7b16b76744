// Package redact is tailgate's one rule for keeping secrets out of what it
// writes: summaries, environment.json, records, logs and progress lines.
//
// A secret is the user info of a URL (user name and password), its query
// string (?api_key=…), the value of any flag or header whose name says key,
// token, secret, password, auth, cookie or credential, and any literal value
// a caller registers (an API key read from a file).
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces a secret value.
const Mask = "[REDACTED]"

// URL returns s without user info and with its query string, if any,
// replaced by Mask. Something that does not parse as a URL with a scheme is
// returned unchanged unless it holds an '@' or '?', when it is masked whole:
// a half-parsed URL could still carry a password.
func URL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		if strings.ContainsAny(s, "@?") {
			return Mask
		}
		return s
	}
	u.User = nil
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = Mask, false
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// Text replaces every URL in free text (an error message) with its
// redacted form, and every literal secret given.
func Text(s string, secrets ...string) string {
	// URLs first: a password masked in place would leave a URL that no
	// longer parses, and it would be masked whole.
	s = urls(s)
	for _, k := range secrets {
		if k != "" {
			s = strings.ReplaceAll(s, k, Mask)
		}
	}
	return s
}

func urls(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			break
		}
		// Back up over the scheme.
		start := i
		for start > 0 && isSchemeByte(s[start-1]) {
			start--
		}
		end := i + 3
		for end < len(s) && !isURLEnd(s[end]) {
			end++
		}
		b.WriteString(s[:start])
		b.WriteString(URL(s[start:end]))
		s = s[end:]
	}
	return b.String()
}

func isSchemeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// isURLEnd: the characters that end a URL inside an error message (Go's
// net/http quotes URLs as `Get "http://…": …`).
func isURLEnd(c byte) bool {
	return c == ' ' || c == '"' || c == '\'' || c == '\n' || c == '\t' || c == '>' || c == ')'
}

// SecretName reports whether a flag or header name says it carries a
// credential: one of its words (split at -, _ and .) is key, token, secret,
// password, auth, authorization, credential(s), bearer, apikey or cookie.
// "max-tokens" and "tokenizer" are not.
func SecretName(name string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
		switch w {
		case "key", "token", "secret", "password", "passwd", "auth", "authorization", "credential", "credentials",
			"bearer", "apikey", "cookie":
			return true
		}
	}
	return false
}

// Header hides the value of a "Name: value" header line that carries a
// credential.
func Header(h string) string {
	name, _, ok := strings.Cut(h, ":")
	if !ok {
		if SecretName(h) || strings.Contains(strings.ToLower(h), "bearer") {
			return Mask
		}
		return h
	}
	if SecretName(strings.TrimSpace(name)) {
		return name + ": " + Mask
	}
	return h
}

// HeaderValue is the value to show for header name: Mask for a credential.
func HeaderValue(name, value string) string {
	if SecretName(name) {
		return Mask
	}
	return value
}

// Args returns a command line with secrets masked: the value of any flag
// whose name says it is a credential; header flags (-H, --header) whose
// header is one; and URLs' user info and query strings.
func Args(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if !strings.HasPrefix(a, "-") {
			out[i] = URL(a)
			continue
		}
		name, val, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !inline && (len(a) > 2 && a[1] != '-' && strings.HasPrefix(a, "-H")) { // -HAuthorization:...
			name, val, inline = "H", a[2:], true
		}
		header := name == "H" || strings.EqualFold(name, "header")
		secret := SecretName(name)
		if !header && !secret {
			if inline {
				out[i] = a[:len(a)-len(val)] + URL(val)
			}
			continue
		}
		mask := func(v string) string {
			if header {
				return Header(v)
			}
			return Mask
		}
		if inline {
			out[i] = a[:len(a)-len(val)] + mask(val)
		} else if i+1 < len(out) && !strings.HasPrefix(out[i+1], "--") {
			out[i+1] = mask(out[i+1])
			i++
		}
	}
	return out
}
