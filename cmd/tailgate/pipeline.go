package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// runSpec is one load run: what to send, how, and where results go. The
// `run` and `validate` commands both go through executeRun.
type runSpec struct {
	Client  loadgen.Client
	Source  loadgen.Source
	Options loadgen.Options
	Meta    loadgen.SummaryMeta
	// OutDir receives requests.jsonl (as records arrive), latency.hlog
	// (one interval a second) and summary.json (at the end, also when
	// interrupted). Empty: nothing is written.
	OutDir string
	// Goodput, if set, judges each OK record against the SLO's per-request
	// goodput constraints.
	Goodput func(*loadgen.Record) bool
	// Progress receives a live status line; nil turns it off.
	Progress io.Writer
	// KeepRecords keeps every record in memory for the caller (validate
	// evaluates objectives exactly from them).
	KeepRecords bool
	// Telemetry, if set, samples the server's metrics and GPUs beside the
	// run: telemetry.jsonl as samples arrive, a summary in summary.json.
	Telemetry *telemetry.Config
}

type runResult struct {
	Summary *loadgen.Summary
	Info    loadgen.Info
	Records []*loadgen.Record
	// WriteErr is the first failure writing results (a full disk); the
	// figures in Summary are still complete, from memory.
	WriteErr error
	// QueueDelay is the server's queue-delay histogram over the run (nil
	// without telemetry or when the server exposes none).
	QueueDelay *telemetry.Histogram
}

// executeRun runs the load and consumes every record on one goroutine:
// appended to requests.jsonl, added to the metrics, written to the
// interval log each second, counted for the progress line.
func executeRun(ctx context.Context, spec runSpec) (*runResult, error) {
	runner, err := loadgen.NewRunner(spec.Client, spec.Source, spec.Options)
	if err != nil {
		return nil, err
	}
	res := &runResult{}
	var jsonl *exporters.JSONLWriter
	var hlog *exporters.HlogWriter
	var hlogFile *os.File
	if spec.OutDir != "" {
		if err := os.MkdirAll(spec.OutDir, 0o755); err != nil {
			return nil, fmt.Errorf("--out %s: %w", spec.OutDir, err)
		}
		if jsonl, err = exporters.CreateJSONL(filepath.Join(spec.OutDir, "requests.jsonl")); err != nil {
			return nil, err
		}
		hp := filepath.Join(spec.OutDir, "latency.hlog")
		if hlogFile, err = os.Create(hp); err != nil {
			return nil, fmt.Errorf("%s: %w", hp, err)
		}
		if hlog, err = exporters.NewHlogWriter(hp, hlogFile, time.Now()); err != nil {
			hlogFile.Close()
			return nil, err
		}
	}
	// keepErr is called from the consumer and the telemetry sampler.
	var errMu sync.Mutex
	keepErr := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if err != nil && res.WriteErr == nil {
			res.WriteErr = err
		}
	}

	var tel *telemetry.Run
	var telStart telemetry.Snapshot
	var telJSONL *exporters.JSONLWriter
	if spec.Telemetry != nil {
		if spec.OutDir != "" {
			if telJSONL, err = exporters.CreateJSONL(filepath.Join(spec.OutDir, "telemetry.jsonl")); err != nil {
				return nil, err
			}
		}
		// The sink runs on the sampler's one goroutine; telJSONL is
		// closed only after Stop, which waits for it.
		tel = telemetry.Start(context.WithoutCancel(ctx), *spec.Telemetry, func(s telemetry.Sample) {
			if telJSONL != nil {
				keepErr(telJSONL.Write(s))
			}
		})
		telStart = tel.Snapshot()
	}

	metrics := loadgen.NewMetrics()
	metrics.Goodput = spec.Goodput
	records := make(chan *loadgen.Record, 4096)
	infoc := make(chan loadgen.Info, 1)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		info, err := runner.Run(ctx, records)
		infoc <- info
		errc <- err
	}()

	total := loadgen.TotalDuration(spec.Options.Stages)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastTick := start
	var done, failed int64
	progress := func(final bool) {
		if spec.Progress == nil {
			return
		}
		p99 := float64(metrics.All.Hist[loadgen.MetricTTFT].ValueAtQuantile(99)) / 1000
		sent := runner.Sent()
		end := "\r"
		if final {
			end = "\n"
		}
		phase := ""
		if el := time.Since(start); el > total && !final {
			phase = "  draining: schedule done, waiting for requests in flight"
		}
		fmt.Fprintf(spec.Progress, "\r%6.1fs/%s  sent %d  in flight %d  errors %d  p99 TTFT %.1f ms%s   %s",
			time.Since(start).Seconds(), total, sent, max(0, sent-done), failed, p99, phase, end)
	}
loop:
	for {
		select {
		case rec, ok := <-records:
			if !ok {
				break loop
			}
			rec.Finalize()
			done++
			if !rec.OK() {
				failed++
			}
			if jsonl != nil {
				keepErr(jsonl.Write(rec))
			}
			metrics.Add(rec)
			if spec.KeepRecords {
				res.Records = append(res.Records, rec)
			}
		case now := <-tick.C:
			if hlog != nil {
				keepErr(hlog.WriteInterval(metrics.TakeInterval(), lastTick, now))
			}
			lastTick = now
			progress(false)
		}
	}
	res.Info = <-infoc
	runErr := <-errc
	if spec.Progress != nil {
		progress(true)
	}
	res.Summary = metrics.Summary(res.Info, spec.Meta)
	if tel != nil {
		qd := telemetry.Delta(telStart, tel.Snapshot())
		if len(qd.Buckets) > 0 || qd.Count > 0 {
			res.QueueDelay = &qd
		}
		ts := tel.Stop()
		if b, err := json.Marshal(ts); err == nil {
			json.Unmarshal(b, &res.Summary.Telemetry)
		}
		if telJSONL != nil {
			keepErr(telJSONL.Close())
		}
	}
	if hlog != nil {
		keepErr(hlog.WriteInterval(metrics.TakeInterval(), lastTick, time.Now()))
		keepErr(hlogFile.Close())
	}
	if jsonl != nil {
		keepErr(jsonl.Close())
	}
	if res.WriteErr != nil {
		res.Summary.Warnings = append(res.Summary.Warnings, "results incomplete on disk: "+res.WriteErr.Error())
	}
	if spec.OutDir != "" {
		keepErr(exporters.WriteJSON(filepath.Join(spec.OutDir, "summary.json"), res.Summary))
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return res, runErr
	}
	return res, nil
}
