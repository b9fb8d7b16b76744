// Package version is tailgate's version, kept in one place: `tailgate
// version`, summary.json's and environment.json's tool, signed
// attestations, reports, tailgate_build_info, the container image's tag
// (the Makefile reads Version from this file) and the User-Agent all read
// it from here.
package version

import "runtime/debug"

// Version is the release this tree is: the newest release CHANGELOG.md
// names (TestChangelogNamesVersion holds the two together). It is a
// constant so that no build can print a version the changelog does not
// describe; the revision says which commit of it a binary is.
const Version = "0.1.0"

// revision is the commit the binary was built from, set by the Makefile
// and the Dockerfile with -ldflags "-X
// github.com/tailgate-llm/tailgate/internal/version.revision=...": their
// builds have no VCS stamp (-buildvcs=false, or no .git in the image's
// build context).
var revision = ""

// Revision is the commit the binary was built from: the -ldflags value,
// else the toolchain's vcs.revision stamp, else "" (go test, go run, a
// build outside the repository).
func Revision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

// RevisionOrUnknown is Revision, or "unknown" where it is empty: for
// labels and lines that must say something.
func RevisionOrUnknown() string {
	if r := Revision(); r != "" {
		return r
	}
	return "unknown"
}

// UserAgent is the User-Agent tailgate's requests carry unless a
// --header sets another: a server's logs can tell tailgate's traffic, and
// which release sent it.
func UserAgent() string { return "tailgate/" + Version }

// Tool names the program that wrote a file: tailgate's one Tool, in
// summary.json, verdict.json, sweep.json and the evidence pack. Go, the
// toolchain it was built with, and Revision, the commit, are written where
// they are known (the evidence pack's environment and attestation).
type Tool struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Go       string `json:"go,omitempty"`
}

// NewTool is tailgate at version.
func NewTool(v string) Tool { return Tool{Name: "tailgate", Version: v} }
