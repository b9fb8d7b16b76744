package transport

import (
	"net"
	"net/url"
	"testing"
)

// canonicalAddr returns the URL's own host:port when it has a port; it
// must be what JoinHostPort writes, or a connection would be pooled
// under two keys.
func TestCanonicalAddr(t *testing.T) {
	for raw, want := range map[string]string{
		"http://127.0.0.1:8000/v1":     "127.0.0.1:8000",
		"http://[::1]:8000/v1":         "[::1]:8000",
		"http://[fe80::1%25lo]:81/":    "[fe80::1%lo]:81",
		"http://Example.com:9/":        "Example.com:9",
		"http://example.com/":          "example.com:80",
		"https://example.com/":         "example.com:443",
		"https://[::1]/":               "[::1]:443",
		"http://user:pw@host.test:7/x": "host.test:7",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := canonicalAddr(u)
		if got != want {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
		if u.Port() != "" {
			if j := net.JoinHostPort(u.Hostname(), u.Port()); got != j {
				t.Errorf("%s: %q, JoinHostPort writes %q", raw, got, j)
			}
		}
	}
}
