package main

import (
	"strings"
	"testing"
)

// A blank row ends a table and the next row heads a new one; a cell's "|"
// cannot break the columns.
func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	writeMarkdown(&b, [][]string{{"step a", "tailgate", "floor"}, {"  c64", "1", "a|b"}, {"", "", ""}, {"step b", "x", ""}})
	want := "| step a | tailgate | floor |\n| --- | --- | --- |\n| c64 | 1 | a\\|b |\n\n| step b | x |  |\n| --- | --- | --- |\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
