package main

import (
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/slo"
)

// `tailgate version` and `--version` print internal/version's Version, the
// release CHANGELOG.md names (internal/version's test holds that).
func TestVersionPrintsTheRelease(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, out, stderr := tgCmd(arg)
		if code != slo.ExitOK || !strings.HasPrefix(out, "tailgate "+version.Version+" (revision ") {
			t.Errorf("tailgate %s: exit %d, %q %q; want tailgate %s (revision …)", arg, code, out, stderr, version.Version)
		}
	}
}
