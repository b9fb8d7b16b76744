package yamlwalk

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Each file shows one way go.yaml.in/yaml/v3's "line N" misses the line at
// fault; lib is what the library says, want what SyntaxError says.
func TestSyntaxErrorLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file, lib, want string
	}{
		{"unclosed-flow-mapping.yaml", "yaml: line 2: did not find expected ',' or '}'",
			"unclosed-flow-mapping.yaml:3: bad YAML: did not find expected ',' or '}'"},
		{"bad-indent-in-list.yaml", "yaml: line 2: did not find expected '-' indicator",
			"bad-indent-in-list.yaml:5: bad YAML: did not find expected '-' indicator (in the item that starts on line 3)"},
		{"bad-indent-in-mapping.yaml", "yaml: line 3: did not find expected key",
			"bad-indent-in-mapping.yaml:4: bad YAML: did not find expected key"},
		{"tab-after-plain-scalar.yaml", "yaml: line 3: found a tab character that violates indentation",
			"tab-after-plain-scalar.yaml:4: bad YAML: found a tab character that violates indentation (in the item that starts on line 3)"},
		{"tab-in-block-scalar.yaml", "yaml: line 2: found a tab character where an indentation space is expected",
			"tab-in-block-scalar.yaml:3: bad YAML: found a tab character where an indentation space is expected (in the item that starts on line 2)"},
		{"tab-indent.yaml", "yaml: line 3: found character that cannot start any token", // already right
			"tab-indent.yaml:3: bad YAML: found character that cannot start any token"},
		{"list-item-in-mapping.yaml", "yaml: line 1: did not find expected key",
			"list-item-in-mapping.yaml:2: bad YAML: did not find expected key"},
		{"first-line.yaml", "yaml: mapping values are not allowed in this context",
			"first-line.yaml:1: bad YAML: mapping values are not allowed in this context"},
		{"unknown-anchor.yaml", "yaml: unknown anchor 'nope' referenced",
			"unknown-anchor.yaml:2: bad YAML: unknown anchor 'nope' referenced"},
		{"control-character.yaml", "yaml: control characters are not allowed",
			"control-character.yaml:2: bad YAML: control characters are not allowed"},
		{"crlf.yaml", "yaml: line 2: did not find expected '-' indicator",
			"crlf.yaml:4: bad YAML: did not find expected '-' indicator (in the item that starts on line 3)"},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", "syntax", c.file))
		if err != nil {
			t.Fatal(err)
		}
		var n yaml.Node
		lerr := yaml.Unmarshal(data, &n)
		if lerr == nil || lerr.Error() != c.lib {
			t.Errorf("%s: the library now says %v, not %q: recheck the case", c.file, lerr, c.lib)
			continue
		}
		_, root := Parse(c.file, data)
		if root.Valid() {
			t.Errorf("%s: parsed", c.file)
			continue
		}
		d, _ := Parse(c.file, data)
		err = d.Err()
		var e *Error
		if !errors.As(err, &e) || err.Error() != c.want {
			t.Errorf("%s:\n  got  %v\n  want %s", c.file, err, c.want)
		}
	}
}

func TestLineEnds(t *testing.T) {
	t.Parallel()
	got := lineEnds([]byte("a\nb\r\nc\rd\xc2\x85e"))
	want := []int{2, 5, 7, 10, 11}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
}
