// Package merge combines the results directories of the shards of one
// schedule (run --shard I/N) into one result under the same summary.json
// contract, as if one process had run the whole schedule.
//
// Figures come from each shard's histograms.json, not from its summary:
// quantiles do not add, HDR histograms do (merging two histograms gives
// exactly the histogram of both populations), and counters sum. So the
// merged summary is the single-process summary within HDR precision,
// whatever form the shards kept their records in. Records are merged too
// (into one requests.jsonl, in the shards' form), so check judges a merged
// directory exactly as a single run; the interval log keeps every shard's
// intervals, in time order.
//
// Merge refuses shards that did not run the same schedule (a different
// load, seed, target, model or mix: every key of histograms.json's
// identity must agree) and a set of shards with an index given twice or
// missing, naming the directories.
package merge

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/version"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
)

// Options configure a merge.
type Options struct {
	// Records is the merged records' form; empty: the shards' (compact if
	// any shard's is compact, none if any kept none).
	Records results.RecordsForm
	// Compression of the merged records; nil: shard 0's.
	Compression *results.Compression
	// Version is the tool version written into the summary.
	Version string
	// SLO, if set, judges the merged run (as check does: from the merged
	// records, by the bounds the shards were held to), writing verdict.json
	// and summary.json's slo.
	SLO *slo.Spec
	// Judge judges a merged run directory against spec as check does
	// (acceptance.Check), returning notes for the user; Rejudge judges a
	// merged plan's records as validate does and writes its verdict,
	// JUnit and manifest (acceptance.Rejudge). merge, a use case, imports
	// no other use case: its caller passes them.
	Judge   func(dir results.Dir, spec *slo.Spec) (*slo.Report, []string, error)
	Rejudge func(dir results.Dir, plan *slo.Plan, cpu map[string]float64, env *evidence.Environment, version string, now time.Time) (*slo.Report, error)
}

// RefusedError lists every reason the shards cannot be merged, each
// naming the directories concerned.
type RefusedError struct{ Problems []string }

func (e *RefusedError) Error() string {
	return "merge refused:\n  " + strings.Join(e.Problems, "\n  ")
}

// shard is one input directory.
type shard struct {
	dir  results.Dir
	h    *results.Histograms
	info loadgen.Info
	m    *measure.Metrics
	sum  *results.Summary // nil when summary.json is missing
}

// Result is what Merge wrote.
type Result struct {
	Summary *results.Summary
	Records int64
	Notes   []string
}

// Merge reads dirs, checks they are the complete set of shards of one
// schedule, and writes the merged result to out.
func Merge(dirs []results.Dir, out results.Dir, opts Options) (*Result, error) {
	shards, err := load(dirs)
	if err != nil {
		return nil, err
	}
	if err := check(shards); err != nil {
		return nil, err
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i].info.Shard.Index < shards[j].info.Shard.Index })
	if err := out.Create(); err != nil {
		return nil, err
	}
	res := &Result{}
	metrics, info, merged := combine(shards)
	sum := summarize(shards, metrics, info, merged, opts)
	if err := keepTelemetry(shards, out, sum, res); err != nil {
		return nil, err
	}
	form, err := writeRecords(shards, info.Started, out, sum, res, opts)
	if err != nil {
		return nil, err
	}
	validity(shards, sum)
	if err := writeState(shards, metrics, info, form, out); err != nil {
		return nil, err
	}
	if opts.SLO == nil {
		if w := unjudged(shards, out); w != "" {
			sum.Warnings = append(sum.Warnings, w) // printed with the summary
		}
	}
	if err := out.WriteSummary(sum); err != nil {
		return nil, err
	}
	res.Summary = sum
	if opts.SLO != nil && form != results.RecordsNone {
		if err := judge(out, sum, res, opts); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// combine merges the shards' histograms onto one clock, the earliest
// shard's start, and their run facts into one Info: counts add up, the
// schedule spans them all, and the self-check judges the busiest shard.
func combine(shards []*shard) (*measure.Metrics, loadgen.Info, *schema.MergedInfo) {
	base := shards[0].info.Started
	for _, s := range shards[1:] {
		if s.info.Started.Before(base) {
			base = s.info.Started
		}
	}
	metrics := measure.NewMetrics()
	info := loadgen.Info{Started: base, Grace: shards[0].info.Grace, StageScheduled: map[string]time.Duration{}}
	var end time.Time
	merged := &schema.MergedInfo{Count: len(shards)}
	first := true
	for _, s := range shards {
		shift := s.info.Started.Sub(base)
		metrics.Merge(s.m, shift)
		if e := s.info.Started.Add(s.info.Elapsed); e.After(end) {
			end = e
		}
		info.Interrupted = info.Interrupted || s.info.Interrupted
		if info.Stopped == nil && s.info.Stopped != nil {
			info.Stopped = fmt.Errorf("shard %d: %w", s.info.Shard.Index, s.info.Stopped)
		}
		info.Sent += s.info.Sent
		info.Dropped += s.info.Dropped
		info.CutAtEnd += s.info.CutAtEnd
		from, to := s.info.Scheduled.From+shift, s.info.Scheduled.To+shift
		if first || from < info.Scheduled.From {
			info.Scheduled.From = from
		}
		if first || to > info.Scheduled.To {
			info.Scheduled.To = to
		}
		first = false
		for k, v := range s.info.StageScheduled {
			info.StageScheduled[k] = max(info.StageScheduled[k], v)
		}
		// The worst shard's CPU: a saturated shard distorts its part.
		info.CPUUtilization = max(info.CPUUtilization, s.info.CPUUtilization)
		// The self-check judges the busiest generator's machine, as it
		// judged that shard: its readings over its sending window, not the
		// merging machine's cores.
		if h := s.info.Host; busier(h, info.Host) {
			info.Host = h
			info.Host.Source = fmt.Sprintf("shard %d, the busiest generator: %s", s.info.Shard.Index, h.Source)
		}
		info.LateStart = max(info.LateStart, s.info.LateStart)
		merged.Shards = append(merged.Shards, schema.MergedShard{Index: s.info.Shard.Index, Dir: string(s.dir),
			Started: s.info.Started.UTC().Format(time.RFC3339Nano), LateByS: s.info.LateStart.Seconds(),
			CPUUtilization: s.info.CPUUtilization, Sent: s.info.Sent, Records: string(s.h.Records)})
	}
	info.Elapsed = end.Sub(base)
	return metrics, info, merged
}

// summarize is the merged run's summary, with every shard's warnings
// named by shard.
func summarize(shards []*shard, metrics *measure.Metrics, info loadgen.Info, merged *schema.MergedInfo, opts Options) *results.Summary {
	meta := shards[0].h.Meta.SummaryMeta()
	if opts.Version != "" {
		meta.Version = opts.Version
	}
	ls := metrics.Summary(info, meta)
	sum := &results.Summary{Summary: *ls}
	sum.Run.Merged = merged
	// Shards ran one mix (merge refuses differing identities, the mix's
	// hash among them), so any shard's plan is the whole run's.
	for _, s := range shards {
		if s.sum != nil && s.sum.PlannedLengths != nil {
			sum.PlannedLengths = s.sum.PlannedLengths
			break
		}
	}
	for _, s := range shards {
		if s.info.LateStart > 0 {
			sum.Warnings = append(sum.Warnings, fmt.Sprintf("shard %d (%s) started %v after --start-at", s.info.Shard.Index, s.dir, s.info.LateStart.Round(time.Microsecond)))
		}
		if s.sum != nil {
			sum.Warnings = append(sum.Warnings, prefixed(s, s.sum.Warnings)...)
		}
	}
	return sum
}

// keepTelemetry keeps shard 0's telemetry: every shard samples the same
// server, so one shard's samples stand for all.
func keepTelemetry(shards []*shard, out results.Dir, sum *results.Summary, res *Result) error {
	if t := shards[0].sum; t != nil && t.Telemetry != nil {
		sum.Telemetry = t.Telemetry
		if t.Telemetry.Capacity != nil {
			sum.Sessions.SetServerPrefixHitRate(t.Telemetry.Capacity.PrefixCacheHitRate)
		}
		res.Notes = append(res.Notes, fmt.Sprintf("telemetry from shard 0 (%s): every shard samples the same server", shards[0].dir))
	}
	for _, name := range []string{results.TelemetryFile, results.QueueDelayFile} {
		if err := copyFile(shards[0].dir.Path(name), out.Path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writeRecords merges the shards' records (in the form they all kept),
// interval log and sessions onto the clock at base. A shard whose
// records disagree with its summary refuses the merge, and the merged
// records begun are taken back.
func writeRecords(shards []*shard, base time.Time, out results.Dir, sum *results.Summary, res *Result, opts Options) (results.RecordsForm, error) {
	form, comp := recordsForm(shards, opts)
	if form != results.RecordsNone {
		path := out.Path(results.RecordsFileName(comp))
		d, err := mergeRecords(shards, base, path, form, comp)
		res.Records = d.Count
		var de *results.DisagreeError
		if errors.As(err, &de) {
			// The shard is found out only once read: take back the
			// merged records begun, so no half merge reads as results.
			os.Remove(path)
			return form, &RefusedError{Problems: []string{de.Error()}}
		}
		if err != nil {
			return form, err
		}
		sum.Records = &d
	} else {
		res.Notes = append(res.Notes, "records: none (a shard kept none); check cannot re-judge this directory")
	}
	if err := mergeHlogs(shards, base, out.Path(results.HlogFile)); err != nil {
		return form, err
	}
	return form, mergeSessions(shards, base, out.Path(results.SessionsFile))
}

// validity judges the merged run by the one model, with the bounds the
// shards were held to (saved with each: shard 0's, as check of the merged
// directory reads them back); a shard invalid on its own makes the merge
// invalid, naming it.
func validity(shards []*shard, sum *results.Summary) {
	sum.Validity = pipeline.Validity(sum, shards[0].h.Bounds(), nil)
	for _, s := range shards {
		if s.sum != nil && !s.sum.Validity.Valid {
			for _, r := range s.sum.Validity.Reasons {
				sum.Validity.Reasons = append(sum.Validity.Reasons, fmt.Sprintf("shard %d (%s): %s", s.info.Shard.Index, s.dir, r))
			}
			sum.Validity.Valid = false
		}
	}
}

// writeState writes the merged histograms and run facts, so the merged
// directory merges and re-judges like a shard's.
func writeState(shards []*shard, metrics *measure.Metrics, info loadgen.Info, form results.RecordsForm, out results.Dir) error {
	st, err := metrics.State()
	if err != nil {
		return err
	}
	h := *shards[0].h
	h.Metrics, h.Info, h.Records = st, info.State(), form
	h.Identity = copyMap(h.Identity)
	h.Identity["merged"] = fmt.Sprint(len(shards))
	return out.WriteHistograms(&h)
}

// judge judges the merged records by opts.SLO and writes the verdicts
// beside the summary.
func judge(out results.Dir, sum *results.Summary, res *Result, opts Options) error {
	if opts.Judge == nil {
		return errors.New("merge: an SLO to judge by, but no Judge")
	}
	rep, notes, err := opts.Judge(out, opts.SLO)
	if err != nil {
		return err
	}
	res.Notes = append(res.Notes, notes...)
	rep.Tool = version.NewTool(opts.Version)
	sum.SLO = rep
	if err := exporters.WriteVerdicts(out, rep); err != nil {
		return err
	}
	return out.WriteSummary(sum)
}

// unjudged says, for a merge without an SLO of shards that were judged
// against one, that the merged run has no verdict and how to get one: a
// shard that failed its SLO must not read as a merge that passed.
func unjudged(shards []*shard, out results.Dir) string {
	var names, verdicts []string
	for _, s := range shards {
		if s.sum == nil || s.sum.SLO == nil {
			continue
		}
		if n := strconv.Quote(s.sum.SLO.SLO); !slices.Contains(names, n) {
			names = append(names, n)
		}
		verdicts = append(verdicts, fmt.Sprintf("shard %d %s", s.info.Shard.Index, s.sum.SLO.Status))
	}
	if len(verdicts) == 0 {
		return ""
	}
	return fmt.Sprintf("the shards were judged against the SLO %s (%s); the merged run has no verdict: merge with --slo FILE, or run tailgate check --slo FILE %s",
		strings.Join(names, ", "), strings.Join(verdicts, ", "), out)
}

func prefixed(s *shard, lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, fmt.Sprintf("shard %d: %s", s.info.Shard.Index, l))
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// load reads every directory's histograms.json (and summary.json when
// there is one); every unreadable directory is named.
func load(dirs []results.Dir) ([]*shard, error) {
	var problems []string
	var out []*shard
	for _, d := range dirs {
		h, err := d.ReadHistograms()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf("%s: no %s: not a finished run of this version (killed, or written before shards could merge)", d, results.HistogramsFile)
			}
			problems = append(problems, err.Error())
			continue
		}
		s := &shard{dir: d, h: h}
		if s.info, err = loadgen.InfoFromState(h.Info); err != nil {
			problems = append(problems, fmt.Sprintf("%s: info: %v", d.Path(results.HistogramsFile), err))
			continue
		}
		if s.info.Shard.Count == 0 {
			s.info.Shard = loadgen.Shard{Index: 0, Count: 1}
		}
		if s.m, err = measure.MetricsFromState(h.Metrics); err != nil {
			problems = append(problems, fmt.Sprintf("%s: metrics: %v", d.Path(results.HistogramsFile), err))
			continue
		}
		if sum, err := d.ReadSummary(); err == nil {
			s.sum = sum
		}
		out = append(out, s)
	}
	if len(problems) > 0 {
		return nil, &RefusedError{Problems: problems}
	}
	if len(out) == 0 {
		return nil, &RefusedError{Problems: []string{"no shard directories given"}}
	}
	return out, nil
}

// check refuses shards of different schedules and a set of shards with an
// index twice or missing.
func check(shards []*shard) error {
	var problems []string
	ref := shards[0]
	name := func(s *shard) string { return fmt.Sprintf("shard %s (%s)", s.info.Shard, s.dir) }
	for _, s := range shards[1:] {
		var diffs []string
		for _, k := range keys(ref.h.Identity, s.h.Identity) {
			a, aok := ref.h.Identity[k]
			b, bok := s.h.Identity[k]
			switch {
			case !aok:
				diffs = append(diffs, fmt.Sprintf("%s %q, absent from the other", k, b))
			case !bok:
				diffs = append(diffs, fmt.Sprintf("%s absent, the other has %q", k, a))
			case a != b:
				diffs = append(diffs, fmt.Sprintf("%s %q ≠ %q", k, b, a))
			}
		}
		if len(diffs) > 0 {
			problems = append(problems, fmt.Sprintf("%s is not a shard of the schedule of %s: %s", name(s), name(ref), strings.Join(diffs, "; ")))
		}
	}
	n := ref.info.Shard.Count
	byIndex := map[int][]*shard{}
	for _, s := range shards {
		if s.info.Shard.Count != n {
			continue // named above: the identity's "shards"
		}
		byIndex[s.info.Shard.Index] = append(byIndex[s.info.Shard.Index], s)
	}
	var missing []string
	for i := 0; i < n; i++ {
		switch g := byIndex[i]; {
		case len(g) == 0:
			missing = append(missing, fmt.Sprint(i))
		case len(g) > 1:
			var ds []string
			for _, s := range g {
				ds = append(ds, string(s.dir))
			}
			problems = append(problems, fmt.Sprintf("shard %d/%d given %d times (overlapping): %s", i, n, len(g), strings.Join(ds, ", ")))
		}
	}
	if len(missing) > 0 && len(problems) == 0 {
		problems = append(problems, fmt.Sprintf("shards %s of %d missing: give every shard's directory", strings.Join(missing, ", "), n))
	} else if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("shards %s of %d missing", strings.Join(missing, ", "), n))
	}
	if len(problems) > 0 {
		return &RefusedError{Problems: problems}
	}
	return nil
}

func keys(a, b map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// recordsForm is the merged records' form and compression.
func recordsForm(shards []*shard, opts Options) (results.RecordsForm, results.Compression) {
	form := results.RecordsFull
	for _, s := range shards {
		switch s.h.Records {
		case results.RecordsNone:
			form = results.RecordsNone
		case results.RecordsCompact:
			if form == results.RecordsFull {
				form = results.RecordsCompact
			}
		}
	}
	if opts.Records != "" && (opts.Records == results.RecordsNone || form == results.RecordsFull || opts.Records == results.RecordsCompact) {
		form = opts.Records // a form the shards' records can give
	}
	comp := results.CompressionOf(shards[0].dir.RecordsPath())
	if opts.Compression != nil {
		comp = *opts.Compression
	}
	return form, comp
}

// mergeRecords writes every shard's records into one file, in order of
// their end (the order a single process writes them), instants moved onto
// the merged epoch. Memory stays flat: one record per shard is held.
func mergeRecords(shards []*shard, base time.Time, path string, form results.RecordsForm, comp results.Compression) (results.RecordsDigest, error) {
	var paths []string
	var shifts []func(*loadgen.Record) time.Duration
	for _, s := range shards {
		d := s.info.Started.Sub(base)
		paths = append(paths, s.dir.RecordsPath())
		shifts = append(shifts, func(*loadgen.Record) time.Duration { return d })
	}
	return results.MergeRecords(paths, shifts, path, form, comp)
}

// mergeSessions writes every shard's sessions.jsonl lines into one, on
// the merged epoch (a shard holds whole sessions: they split by session).
func mergeSessions(shards []*shard, base time.Time, path string) error {
	var paths []string
	var shifts []time.Duration
	for _, s := range shards {
		paths = append(paths, s.dir.Path(results.SessionsFile))
		shifts = append(shifts, s.info.Started.Sub(base))
	}
	_, err := results.MergeSessionFiles(paths, shifts, path)
	return err
}

// mergeHlogs writes every shard's latency.hlog intervals into one log in
// order of start time.
func mergeHlogs(shards []*shard, base time.Time, path string) error {
	var paths []string
	for _, s := range shards {
		paths = append(paths, s.dir.Path(results.HlogFile))
	}
	return results.MergeHlogs(paths, base, path)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		return &results.WriteError{Path: to, Err: err}
	}
	return nil
}

// busier: h's generator used a larger share of its cores over its sending
// window than than's (a reading over no window is never busier).
func busier(h, than selfcheck.HostLoad) bool {
	if h.WindowS <= 0 || h.Cores <= 0 {
		return false
	}
	if than.WindowS <= 0 || than.Cores <= 0 {
		return true
	}
	return h.OwnCores/float64(h.Cores) > than.OwnCores/float64(than.Cores)
}
