package yamlwalk

import (
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// parserProblems are the problems go.yaml.in/yaml/v3's parser (not its
// scanner) reports; for these the line it names is 0-based.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// reparseBudget bounds the bytes re-parsed to locate one syntax error.
const reparseBudget = 16 << 20

// SyntaxError turns the error go.yaml.in/yaml/v3 gave for data into an
// *Error at the line at fault. The library's "line N" is wrong in several
// ways: parser errors name the 0-based line (the line before); errors
// inside a block, flow collection or multi-line scalar name the line where
// that starts, not the offending line (a bad indentation deep in a list, a
// tab in a block scalar); and errors on line 1, bad UTF-8 and unknown
// anchors name no line at all. The line at fault is found by re-parsing:
// it is the first line L from the named one on such that lines 1..L alone
// fail with the same error.
func SyntaxError(file string, data []byte, err error) *Error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	named, problem := 0, strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		named, _ = strconv.Atoi(m[1])
		problem = m[2]
	}
	start := named
	if parserProblems[problem] {
		start++ // 0-based
	}
	start = max(start, 1)
	ends := lineEnds(data)
	line, spent := 0, 0
	for l := max(named, 1); l <= len(ends) && spent < reparseBudget; l++ {
		prefix := data[:ends[l-1]]
		spent += len(prefix)
		var n yaml.Node
		if e := yaml.Unmarshal(prefix, &n); e != nil && e.Error() == err.Error() {
			line = l
			break
		}
	}
	if line == 0 {
		line = min(start, max(len(ends), 1))
	}
	if named > 0 && start < line {
		// The library named where the enclosing item starts.
		problem += " (in the item that starts on line " + strconv.Itoa(start) + ")"
	}
	return Errorf(file, line, "", "bad YAML: %s", problem)
}

// lineEnds is the offset just past each line of data, counting line breaks
// as the YAML scanner does: LF, CR, CRLF, NEL, LS and PS.
func lineEnds(data []byte) []int {
	var ends []int
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			i++
			ends = append(ends, i+1)
		case data[i] == '\n' || data[i] == '\r':
			ends = append(ends, i+1)
		case data[i] == 0xC2 && i+1 < len(data) && data[i+1] == 0x85:
			i++
			ends = append(ends, i+1)
		case data[i] == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xA8 || data[i+2] == 0xA9):
			i += 2
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] < len(data) {
		ends = append(ends, len(data))
	}
	return ends
}
