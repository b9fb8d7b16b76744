package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The newest release heading of CHANGELOG.md ("## [X.Y.Z] - date", after
// "## [Unreleased]") is Version: a release bumps both or the test fails.
func TestChangelogNamesVersion(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$`)
	m := re.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("CHANGELOG.md: no release heading \"## [X.Y.Z] - YYYY-MM-DD\"")
	}
	if m[1] != Version {
		t.Errorf("CHANGELOG.md's newest release is %s, version.Version is %s", m[1], Version)
	}
	if !strings.Contains(string(b), "["+Version+"]: ") {
		t.Errorf("CHANGELOG.md has no link reference for [%s]", Version)
	}
}

func TestRevisionFromLdflags(t *testing.T) {
	old := revision
	defer func() { revision = old }()
	revision = "abc123"
	if Revision() != "abc123" || RevisionOrUnknown() != "abc123" {
		t.Errorf("Revision() = %q, RevisionOrUnknown() = %q, want the -ldflags value", Revision(), RevisionOrUnknown())
	}
	revision = ""
	if r := Revision(); r == "" && RevisionOrUnknown() != "unknown" {
		t.Errorf("RevisionOrUnknown() = %q with no revision, want unknown", RevisionOrUnknown())
	}
}

func TestUserAgent(t *testing.T) {
	t.Parallel()
	if got := UserAgent(); got != "tailgate/"+Version {
		t.Errorf("UserAgent() = %q", got)
	}
}
