package main

import (
	"encoding/json"
	"fmt"
	"github.com/tailgate-llm/tailgate/internal/redact"
	"io"
	"sort"
	"strings"
)

func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}

// kindsLine formats error counts as "http_429=3 timeout=1".
func kindsLine(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return b.String()
}

// safeURL drops credentials and query strings from a URL before it is
// written into a summary or printed.
func safeURL(s string) string { return redact.URL(s) }
