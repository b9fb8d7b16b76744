package results

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// ReadSessions reads a sessions.jsonl; a missing file is os.ErrNotExist.
func ReadSessions(path string) ([]loadgen.SessionLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []loadgen.SessionLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var l loadgen.SessionLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// MergeSessionFiles writes the sessions of every shard's sessions.jsonl
// (paths; a shard without one had no sessions) into path, their instants
// moved by the shard's shift onto the merged epoch, in order of end as a
// single process writes them. It writes nothing when no shard had one,
// and says how many sessions it wrote.
func MergeSessionFiles(paths []string, shifts []time.Duration, path string) (int, error) {
	var all []loadgen.SessionLine
	found := false
	for i, p := range paths {
		ls, err := ReadSessions(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		found = true
		d := shifts[i].Microseconds()
		for j := range ls {
			ls[j].StartUs += d
			ls[j].EndUs += d
		}
		all = append(all, ls...)
	}
	if !found {
		return 0, nil
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].EndUs < all[j].EndUs })
	w, err := CreateJSONL(path)
	if err != nil {
		return 0, err
	}
	for _, l := range all {
		if err := w.Write(l); err != nil {
			w.Close()
			return 0, err
		}
	}
	return len(all), w.Close()
}
