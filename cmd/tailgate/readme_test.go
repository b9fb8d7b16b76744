package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/slo"
)

// docFiles are the documents whose commands are checked: README.md,
// docs/*.md and docs/design/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../../README.md"}
	for _, pat := range []string{"../../docs/*.md", "../../docs/design/*.md"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// readmeCommands are the tailgate command lines of a document's shell
// blocks, continuation lines joined, comments and shell plumbing (&, ;,
// redirections, pipes) cut off.
func readmeCommands(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	inSh, cont := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
			continue
		case strings.HasPrefix(line, "```"):
			inSh = false
			continue
		case !inSh:
			continue
		}
		if cont != "" {
			line = cont + " " + strings.TrimSpace(line)
			cont = ""
		}
		if strings.HasSuffix(line, "\\") {
			cont = strings.TrimSuffix(line, "\\")
			continue
		}
		if !strings.HasPrefix(line, "bin/tailgate ") {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		for _, cut := range []string{" & ", " &", ";", " >", " |"} {
			if i := strings.Index(line, cut); i >= 0 {
				line = line[:i]
			}
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out
}

// Every tailgate command in the README and in docs/ parses: its command
// exists and every flag it gives is one of that command's, with a value of
// the right kind. Each is run with --help appended, so it parses and stops
// before doing anything.
func TestREADMECommandsParse(t *testing.T) {
	// --help after an unknown flag does not hide it: the check can fail.
	if code, _, _ := tgCmd("run", "--no-such-flag", "--help"); code != slo.ExitUsage {
		t.Fatalf("an unknown flag before --help: exit %d, want %d", code, slo.ExitUsage)
	}
	total := 0
	for _, path := range docFiles(t) {
		name := strings.TrimPrefix(path, "../../")
		cmds := readmeCommands(t, path)
		total += len(cmds)
		if name == "README.md" && len(cmds) < 10 {
			t.Fatalf("found %d tailgate commands in README.md: the extraction is broken", len(cmds))
		}
		checkCommands(t, name, cmds)
	}
	if total < 40 {
		t.Fatalf("found %d tailgate commands in README.md and docs/: the extraction is broken", total)
	}
}

func checkCommands(t *testing.T, doc string, cmds []string) {
	t.Helper()
	for _, c := range cmds {
		if strings.Contains(c, "…") || strings.Contains(c, "...") {
			continue // an elided example: the words are not all there
		}
		args := strings.Fields(strings.TrimPrefix(c, "bin/tailgate "))
		for i, a := range args {
			if strings.Contains(a, "$") {
				args[i] = "2026-12-03T12:00:00Z" // a shell variable ($T: a start time)
			}
		}
		code, _, stderr := tgCmd(append(args, "--help")...)
		if code != slo.ExitOK {
			t.Errorf("%s: %s\n  exit %d: %s", doc, c, code, stderr)
		}
	}
}
