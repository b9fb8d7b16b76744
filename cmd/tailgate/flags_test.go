package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateFlags = flag.Bool("update-flags", false, "rewrite docs/flags.md from the commands' --help")

// flagReference is docs/flags.md: every command's --help, as the command
// prints it, in name order (slo as slo rules, its one subcommand).
func flagReference(t *testing.T) []byte {
	t.Helper()
	var names []string
	for name := range commands {
		if name != "version" { // prints the version, which no file should pin
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var b bytes.Buffer
	b.WriteString("# Flags\n\n")
	b.WriteString("Every command's `--help`, as `tailgate help COMMAND` prints it. Generated:\n")
	b.WriteString("`go test ./cmd/tailgate -run TestFlagReference -update-flags` rewrites this\n")
	b.WriteString("file, and the test fails when a flag changed without it.\n")
	for _, name := range names {
		args := []string{name, "--help"}
		if name == "slo" {
			args = []string{"slo", "rules", "--help"}
		}
		_, out, errOut := tgCmd(args...)
		text := strings.TrimRight(out+errOut, "\n")
		if !strings.Contains(text, "Usage: tailgate ") {
			t.Fatalf("tailgate %s: no usage in its help:\n%s", strings.Join(args, " "), text)
		}
		fmt.Fprintf(&b, "\n## tailgate %s\n\n```text\n%s\n```\n", strings.Join(args[:len(args)-1], " "), text)
	}
	return b.Bytes()
}

// docs/flags.md is what the commands' --help prints now: a flag added,
// renamed or reworded without regenerating the file fails here.
func TestFlagReference(t *testing.T) {
	want := flagReference(t)
	const path = "../../docs/flags.md"
	if *updateFlags {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/tailgate -run TestFlagReference -update-flags writes it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("docs/flags.md is stale at line %d:\n  file: %s\n  now:  %s\n(go test ./cmd/tailgate -run TestFlagReference -update-flags rewrites it)", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("docs/flags.md is stale: %d lines, the commands' help makes %d (go test ./cmd/tailgate -run TestFlagReference -update-flags rewrites it)", len(gl), len(wl))
	}
}
