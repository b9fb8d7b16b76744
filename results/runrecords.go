package results

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// ReadRunRecords streams every record of the results directory d to fn,
// as ReadRecords does one file. A run's (or a merge's) records are d's own
// requests.jsonl. A validate keeps its records once, in each stage's run
// directory (stages/NAME/requests.jsonl): without a requests.jsonl of its
// own, d's stages are read one after another in the order they ran (by
// their summary.json's start; a stage without one, cut short, last), and
// each stage's Seq is moved past the stage before's, as the plan-wide
// copy validate used to write numbered them, so stages still sort by
// their first Seq. A validate directory written before then still has
// that copy, and it is read instead.
//
// The stats count every file's records; a torn last line is the last
// torn file's (TornPath names it).
func (d Dir) ReadRunRecords(fn func(*loadgen.Record) error) (ReadStats, error) {
	own := d.RecordsPath()
	if _, err := os.Stat(own); err == nil {
		return ReadRecords(own, fn)
	}
	stages, err := d.stagesRun()
	if err != nil || len(stages) == 0 {
		// Not a validate: the usual error for a missing requests.jsonl.
		return ReadRecords(own, fn)
	}
	var all ReadStats
	var offset int64
	read := 0
	for _, sd := range stages {
		path := sd.RecordsPath()
		maxSeq := int64(-1)
		st, err := ReadRecords(path, func(r *loadgen.Record) error {
			maxSeq = max(maxSeq, r.Seq)
			r.Seq += offset
			return fn(r)
		})
		if errors.Is(err, os.ErrNotExist) {
			continue // a stage that kept no records
		}
		read++
		all.Records += st.Records
		all.Files = append(all.Files, st.Files...)
		if st.TornTail {
			all.TornTail, all.TornLine, all.TornPath = true, st.TornLine, st.TornPath
		}
		if err != nil {
			return all, err
		}
		offset += maxSeq + 1
	}
	if read == 0 {
		return all, fmt.Errorf("%s: no %s, and none in its %s: %w", d, RecordsFile, StagesDir, os.ErrNotExist)
	}
	return all, nil
}

// stagesRun lists d's stage directories in the order they ran.
func (d Dir) stagesRun() ([]Dir, error) {
	ents, err := os.ReadDir(d.Path(StagesDir))
	if err != nil {
		return nil, err
	}
	type stage struct {
		dir     Dir
		name    string
		started time.Time // zero: no summary
	}
	var out []stage
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		s := stage{dir: d.Stage(e.Name()), name: e.Name()}
		if sum, err := s.dir.ReadSummary(); err == nil {
			s.started, _ = time.Parse(time.RFC3339Nano, sum.Run.Started)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b stage) int {
		switch {
		case a.started.IsZero() != b.started.IsZero():
			if a.started.IsZero() {
				return 1
			}
			return -1
		case !a.started.Equal(b.started):
			return a.started.Compare(b.started)
		}
		return cmp.Compare(a.name, b.name)
	})
	dirs := make([]Dir, len(out))
	for i, s := range out {
		dirs[i] = s.dir
	}
	return dirs, nil
}
