package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/slo"
)

// Files of a results directory that check and validate share.
const (
	requestsFile = "requests.jsonl"
	verdictFile  = "verdict.json"
	junitFile    = "junit.xml"
	manualFile   = "manual.json"
)

func cmdCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	sloPath := fs.String("slo", "", "SLO file to judge the saved results against (required)")
	planPath := fs.String("plan", "", "plan file: which objectives apply to which stage, waivers, validity bounds\n(default: the plan copy in DIR/inputs, if the run saved one)")
	at := fs.String("at", "", "judge waiver expiry at this RFC 3339 time or date, or \"now\"\n(default: when the run was judged, from DIR/verdict.json; else now)")
	out := fs.String("out", "", "write verdict.json and junit.xml to this directory (default: write nothing)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: tailgate check --slo slo.yaml [flags] DIR\n\n"+
			"Re-judges a saved run (DIR/requests.jsonl) against an SLO without re-running it, so a\n"+
			"reviewer can reproduce the verdict. Exit 0 pass, 1 objective failed, 2 usage, 3 run invalid.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 1 || *sloPath == "" {
		fs.Usage()
		return exitUsage
	}
	dir := fs.Arg(0)
	spec, err := slo.LoadSpec(*sloPath)
	if err != nil {
		fmt.Fprintln(stderr, "tailgate check:", err)
		return exitUsage
	}
	for _, w := range spec.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if *planPath == "" {
		if m, _ := filepath.Glob(filepath.Join(dir, "inputs", "plan-*")); len(m) == 1 {
			*planPath = m[0]
			fmt.Fprintf(stderr, "tailgate check: using the run's plan %s\n", m[0])
		}
	}
	var plan *slo.Plan
	if *planPath != "" {
		b, err := os.ReadFile(*planPath)
		if err == nil {
			plan, err = slo.ParsePlan(*planPath, b)
		}
		if err == nil {
			err = plan.Check(spec)
		}
		if err != nil {
			fmt.Fprintln(stderr, "tailgate check:", err)
			return exitUsage
		}
	}
	records, err := readRecords(filepath.Join(dir, requestsFile))
	if err != nil {
		fmt.Fprintln(stderr, "tailgate check:", err)
		return exitUsage
	}
	prev, _ := readReport(filepath.Join(dir, verdictFile))
	now, err := judgeTime(*at, prev)
	if err != nil {
		fmt.Fprintln(stderr, "tailgate check: --at:", err)
		return exitUsage
	}
	in := slo.Input{Records: records, Now: now, ClientCPU: map[string]float64{}}
	// Server queue-delay telemetry is not in the records: validate saved
	// what it judged on.
	if in.QueueDelay, err = readQueueTelemetry(filepath.Join(dir, queueFile)); err != nil {
		fmt.Fprintln(stderr, "tailgate check:", err)
		return exitUsage
	}
	if in.Manual, err = readManual(filepath.Join(dir, manualFile)); err != nil {
		fmt.Fprintln(stderr, "tailgate check:", err)
		return exitUsage
	}
	if prev != nil {
		for _, st := range prev.Stages {
			if st.ClientCPU != nil {
				in.ClientCPU[st.Name] = *st.ClientCPU
			}
		}
	}
	rep := slo.Assess(plan, spec, in)
	rep.Tool = slo.Tool{Name: "tailgate", Version: version}
	fmt.Fprintf(stdout, "tailgate check %s against %s (waivers judged at %s)\n\n", dir, *sloPath, now.Format(time.RFC3339))
	if err := exporters.WriteVerdictTable(stdout, rep); err != nil {
		fmt.Fprintln(stderr, "tailgate check:", err)
	}
	if *out != "" {
		if err := writeVerdicts(*out, rep); err != nil {
			fmt.Fprintln(stderr, "tailgate check:", err)
			return exitUsage
		}
	}
	return rep.ExitCode
}

// judgeTime is --at, or the time the run was judged, or now.
func judgeTime(at string, prev *slo.Report) (time.Time, error) {
	switch {
	case at == "now":
		return time.Now().UTC(), nil
	case at != "":
		if t, err := time.Parse(time.RFC3339, at); err == nil {
			return t, nil
		}
		return time.Parse(time.DateOnly, at)
	case prev != nil && !prev.EvaluatedAt.IsZero():
		return prev.EvaluatedAt, nil
	}
	return time.Now().UTC(), nil
}

// readRecords reads requests.jsonl (loadgen.Record's JSON form).
func readRecords(path string) ([]loadgen.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []loadgen.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var r loadgen.Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func readReport(path string) (*slo.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r slo.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// readManual reads the manual stage results recorded in a results
// directory (absent: none).
func readManual(path string) ([]slo.ManualRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m []slo.ManualRecord
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// writeVerdicts writes verdict.json and junit.xml into dir.
func writeVerdicts(dir string, r *slo.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := exporters.WriteJSON(filepath.Join(dir, verdictFile), r); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, junitFile))
	if err != nil {
		return err
	}
	if err := exporters.WriteJUnit(f, r); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return f.Close()
}
