package merge

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// IsPlanRun reports whether dir is a validate's evidence directory (per
// stage results under stages/) rather than one run's.
func IsPlanRun(dir results.Dir) bool {
	st, err := os.Stat(filepath.Join(string(dir), results.StagesDir))
	_, herr := os.Stat(dir.Path(results.HistogramsFile))
	return err == nil && st.IsDir() && errors.Is(herr, os.ErrNotExist)
}

// PlanResult is what Plan wrote.
type PlanResult struct {
	Report *slo.Report
	Stages map[string]*Result
	Notes  []string
}

// Plan merges the evidence directories of the shards of one sharded
// validate (validate --shard I/N): every stage as Merge does (its records
// with it: a validate keeps them per stage only), the inputs (which must
// be byte for byte the same in every shard), and every shard's
// environment.json under shards/; then it judges the merged records under
// the plan exactly as a single validate does and writes one verdict,
// junit.xml and manifest. A shard written when validate also kept a
// plan-wide requests.jsonl merges alike: that copy is not read.
func Plan(dirs []results.Dir, out results.Dir, opts Options) (*PlanResult, error) {
	if opts.Rejudge == nil {
		return nil, errors.New("merge: a plan to judge, but no Rejudge")
	}
	// Refusals first, before anything is written.
	envs, err := readEnvironments(dirs)
	if err != nil {
		return nil, err
	}
	stageNames, stageShards, err := checkPlanShards(dirs, envs)
	if err != nil {
		return nil, err
	}
	planCopy, sloCopy := envs[0].Inputs["plan"].Copy, envs[0].Inputs["slo"].Copy
	if planCopy == "" || sloCopy == "" {
		return nil, fmt.Errorf("%s: %s lists no plan or SLO copy", dirs[0], results.EnvironmentFile)
	}
	res, cpu, err := mergeStages(dirs, out, stageNames, opts)
	if err != nil {
		return nil, err
	}
	if err := copyPlanFiles(dirs, out, stageShards, stageNames); err != nil {
		return nil, err
	}
	plan, err := slo.ParsePlan(filepath.Join(string(out), planCopy), mustRead(filepath.Join(string(out), planCopy)))
	if err != nil {
		return nil, err
	}
	if plan.SLO, err = slo.LoadSpec(filepath.Join(string(out), sloCopy)); err != nil {
		return nil, err
	}
	env := spanningEnvironment(envs)
	rep, err := opts.Rejudge(out, plan, cpu, &env, opts.Version, time.Now().UTC())
	res.Report = rep
	res.Notes = append(res.Notes, fmt.Sprintf("every shard's environment is in %s/%s/%s", results.ShardsDir, results.ShardDirs, results.EnvironmentFile))
	return res, err
}

// readEnvironments reads every shard's environment.json; a shard without
// one is not a finished validate.
func readEnvironments(dirs []results.Dir) ([]*evidence.Environment, error) {
	envs := make([]*evidence.Environment, len(dirs))
	var problems []string
	for i, d := range dirs {
		b, err := os.ReadFile(d.Path(results.EnvironmentFile))
		if err == nil {
			var e evidence.Environment
			if err = json.Unmarshal(b, &e); err == nil {
				envs[i] = &e
				continue
			}
		}
		problems = append(problems, fmt.Sprintf("%s: %s: %v (not a finished validate)", d, results.EnvironmentFile, err))
	}
	if len(problems) > 0 {
		return nil, &RefusedError{Problems: problems}
	}
	return envs, nil
}

// checkPlanShards refuses shards that ran different inputs or whose
// stages do not merge, naming every problem at once; it returns the
// stages and each stage's loaded shards.
func checkPlanShards(dirs []results.Dir, envs []*evidence.Environment) ([]string, map[string][]*shard, error) {
	var problems []string
	for i := 1; i < len(dirs); i++ {
		for _, role := range inputRoles(envs[0], envs[i]) {
			a, b := envs[0].Inputs[role], envs[i].Inputs[role]
			if a.SHA256 != b.SHA256 {
				problems = append(problems, fmt.Sprintf("%s and %s ran different %s files (sha256 %.12s ≠ %.12s)", dirs[i], dirs[0], role, b.SHA256, a.SHA256))
			}
		}
	}
	stageNames, err := stageDirs(dirs)
	if err != nil {
		return nil, nil, err
	}
	if len(problems) > 0 {
		return nil, nil, &RefusedError{Problems: problems}
	}
	stageShards := map[string][]*shard{}
	for _, name := range stageNames {
		sh, err := load(stageDirsOf(dirs, name))
		if err == nil {
			err = check(sh)
		}
		var re *RefusedError
		if errors.As(err, &re) {
			for _, p := range re.Problems {
				problems = append(problems, "stage "+name+": "+p)
			}
			continue
		} else if err != nil {
			return nil, nil, err
		}
		stageShards[name] = sh
	}
	if len(problems) > 0 {
		return nil, nil, &RefusedError{Problems: problems}
	}
	return stageNames, stageShards, nil
}

// mergeStages creates out, removes a verdict an earlier merge left, and
// merges every stage; it returns each stage's client CPU share too.
func mergeStages(dirs []results.Dir, out results.Dir, stageNames []string, opts Options) (*PlanResult, map[string]float64, error) {
	if err := out.Create(); err != nil {
		return nil, nil, err
	}
	for _, stale := range []string{results.VerdictFile, results.JUnitFile, results.ManualFile} {
		os.Remove(out.Path(stale))
	}
	res := &PlanResult{Stages: map[string]*Result{}}
	cpu := map[string]float64{}
	for _, name := range stageNames {
		sr, err := Merge(stageDirsOf(dirs, name), out.Stage(name), opts)
		if err != nil {
			return nil, nil, fmt.Errorf("stage %s: %w", name, err)
		}
		res.Stages[name] = sr
		cpu[name] = sr.Summary.Run.CPUUtilization
	}
	return res, cpu, nil
}

// copyPlanFiles copies the inputs and the queue-delay file from shard 0
// and every shard's environment.json under shards/.
func copyPlanFiles(dirs []results.Dir, out results.Dir, stageShards map[string][]*shard, stageNames []string) error {
	if err := copyTree(filepath.Join(string(dirs[0]), results.InputsDir), filepath.Join(string(out), results.InputsDir)); err != nil {
		return err
	}
	if err := copyFile(dirs[0].Path(results.QueueDelayFile), out.Path(results.QueueDelayFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, d := range dirs {
		idx := shardIndex(stageShards, stageNames, d)
		to := filepath.Join(string(out), results.ShardsDir, results.ShardDir(idx))
		if err := os.MkdirAll(to, 0o755); err != nil {
			return &results.WriteError{Path: to, Err: err}
		}
		if err := copyFile(d.Path(results.EnvironmentFile), filepath.Join(to, results.EnvironmentFile)); err != nil {
			return err
		}
	}
	return nil
}

// spanningEnvironment is the merged pack's environment: shard 0's (the
// inputs, the server), spanning every shard's run; each shard's own is
// under shards/.
func spanningEnvironment(envs []*evidence.Environment) evidence.Environment {
	env := *envs[0]
	for _, e := range envs[1:] {
		if e.Started.Before(env.Started) {
			env.Started = e.Started
		}
		if e.Ended.After(env.Ended) {
			env.Ended = e.Ended
		}
	}
	return env
}

func mustRead(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

func stageDirsOf(dirs []results.Dir, name string) []results.Dir {
	var out []results.Dir
	for _, d := range dirs {
		out = append(out, d.Stage(name))
	}
	return out
}

// shardIndex is the shard index of evidence directory d, from its stages.
func shardIndex(stageShards map[string][]*shard, names []string, d results.Dir) int {
	for _, n := range names {
		for _, s := range stageShards[n] {
			if s.dir == d.Stage(n) {
				return s.info.Shard.Index
			}
		}
	}
	return -1
}

func inputRoles(a, b *evidence.Environment) []string {
	seen := map[string]bool{}
	for r := range a.Inputs {
		seen[r] = true
	}
	for r := range b.Inputs {
		seen[r] = true
	}
	var out []string
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// stageDirs lists the stages every directory ran, refusing directories
// whose stages differ.
func stageDirs(dirs []results.Dir) ([]string, error) {
	list := func(d results.Dir) []string {
		es, _ := os.ReadDir(filepath.Join(string(d), results.StagesDir))
		var n []string
		for _, e := range es {
			if e.IsDir() {
				n = append(n, e.Name())
			}
		}
		sort.Strings(n)
		return n
	}
	ref := list(dirs[0])
	if len(ref) == 0 {
		return nil, &RefusedError{Problems: []string{fmt.Sprintf("%s: no stages under %s/", dirs[0], results.StagesDir)}}
	}
	var problems []string
	for _, d := range dirs[1:] {
		if got := list(d); strings.Join(got, ",") != strings.Join(ref, ",") {
			problems = append(problems, fmt.Sprintf("%s ran stages %v, %s ran %v", d, got, dirs[0], ref))
		}
	}
	if len(problems) > 0 {
		return nil, &RefusedError{Problems: problems}
	}
	return ref, nil
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if e.IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return &results.WriteError{Path: dst, Err: err}
			}
			return nil
		}
		return copyFile(p, dst)
	})
}
