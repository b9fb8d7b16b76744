package main

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/slo"
)

// readmeCommands are the tailgate command lines of README.md's shell
// blocks, continuation lines joined, comments and shell plumbing (&, ;,
// redirections, pipes) cut off.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
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

// Every tailgate command in the README parses: its command exists and
// every flag it gives is one of that command's, with a value of the right
// kind. Each is run with --help appended, so it parses and stops before
// doing anything.
func TestREADMECommandsParse(t *testing.T) {
	// --help after an unknown flag does not hide it: the check can fail.
	if code, _, _ := tgCmd("run", "--no-such-flag", "--help"); code != slo.ExitUsage {
		t.Fatalf("an unknown flag before --help: exit %d, want %d", code, slo.ExitUsage)
	}
	cmds := readmeCommands(t)
	if len(cmds) < 20 {
		t.Fatalf("found %d tailgate commands in README.md: the extraction is broken", len(cmds))
	}
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
			t.Errorf("README: %s\n  exit %d: %s", c, code, stderr)
		}
	}
}
