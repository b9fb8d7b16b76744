package main

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/internal/promtest"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// nativeBucket is the bucket of a native histogram (positive buckets and
// the zero bucket) that holds the sample of rank ceil(q·count), as
// (lower, upper] in seconds.
func nativeBucket(t *testing.T, h *dto.Histogram, q float64) (lower, upper float64) {
	t.Helper()
	if h.Schema == nil {
		t.Fatal("no native histogram")
	}
	rank := uint64(math.Ceil(q * float64(h.GetSampleCount())))
	cum := h.GetZeroCount()
	if cum >= rank {
		return 0, h.GetZeroThreshold()
	}
	base := math.Pow(2, math.Pow(2, -float64(h.GetSchema())))
	var idx int32
	var count int64
	d := 0
	for _, sp := range h.PositiveSpan {
		idx += sp.GetOffset()
		for range sp.GetLength() {
			count += h.PositiveDelta[d]
			d++
			cum += uint64(count)
			if cum >= rank {
				return math.Pow(base, float64(idx-1)), math.Pow(base, float64(idx))
			}
			idx++
		}
	}
	t.Fatalf("rank %d beyond the buckets (%d counted)", rank, cum)
	return 0, 0
}

// withinBucket says whether want (seconds) lies in (lower, upper] widened
// by the schema's factor on each side: an HDR value and a native bucket
// of the same sample can straddle a bucket edge by HDR's own precision.
func withinBucket(want, lower, upper, factor float64) bool {
	return want > lower/factor && want <= upper*factor
}

const ttftSLO = `kind: SLO
name: chat
owner: sre@example.com
objectives:
  - {name: ttft-p99, metric: ttft, threshold: 500ms, target: 99%}
`

// run --push sends protobuf (the delimited format), so the native
// histograms survive the push: the TTFT one counts every TTFT sample of
// summary.json, and the bucket holding its 99th percentile holds
// summary.json's p99 within the schema's resolution (factor 1.1). The
// classic buckets are there beside it; --push-histograms native drops
// them, classic drops the native histogram.
func TestRunPushNativeHistogram(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL, cfg.Jitter = 20*time.Millisecond, time.Millisecond, 15*time.Millisecond
	srv := simtest.Start(t, cfg)
	sloFile := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(sloFile, []byte(ttftSLO), 0o644)
	for _, mode := range []string{"", "native", "classic"} {
		t.Run("mode="+mode, func(t *testing.T) {
			pg, url := startPushgateway(t, http.StatusOK)
			dir := t.TempDir()
			args := []string{"--target", srv.URL, "--model", "sim-llama-8b", "--rate", "100", "--arrival", "constant",
				"--duration", "1s", "--max-tokens", "4", "--out", dir, "--slo", sloFile, "--push", url}
			if mode != "" {
				args = append(args, "--push-histograms", mode)
			}
			code, stdout, stderr := runCmd(t, args...)
			if code == slo.ExitUsage || code == slo.ExitInvalid {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			if f := expfmt.ResponseFormat(pg.header); f.FormatType() != expfmt.TypeProtoDelim {
				t.Fatalf("pushed as %q, want protobuf (the text format has no native histograms)", pg.header.Get("Content-Type"))
			}
			s := readSummary(t, dir)
			want := s.LatencyMs[measure.MetricTTFT]
			if want.Count < 50 {
				t.Fatalf("summary TTFT count %d: too few to judge a p99", want.Count)
			}
			h := pg.families(t)[prom.TTFTSeconds].GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != uint64(want.Count) {
				t.Errorf("pushed TTFT count %d, summary %d", h.GetSampleCount(), want.Count)
			}
			if classic := len(h.Bucket) > 0; classic != (mode != "native") {
				t.Errorf("classic buckets %v", classic)
			}
			if mode == "classic" {
				if h.Schema != nil {
					t.Errorf("native histogram pushed in classic mode (schema %d)", h.GetSchema())
				}
				return
			}
			lo, hi := nativeBucket(t, h, 0.99)
			if p99 := want.P99 / 1e3; !withinBucket(p99, lo, hi, 1.1) {
				t.Errorf("summary TTFT p99 %.6fs outside the native bucket (%.6f, %.6f] widened by 1.1", p99, lo, hi)
			}
			t.Logf("TTFT p99: summary %.3f ms, native bucket (%.3f, %.3f] ms, schema %d, count %d",
				want.P99, lo*1e3, hi*1e3, h.GetSchema(), h.GetSampleCount())
		})
	}
}

// A run pushed to Debian's Pushgateway and scraped from it by Debian's
// Prometheus with --enable-feature=native-histograms: the Pushgateway
// keeps the native histogram, and histogram_quantile(0.99) over the
// stored native series agrees with summary.json's TTFT p99 within the
// schema's resolution. A pushed run's histogram holds still after the
// push, so rate() over it is zero: the whole run's quantile is the
// quantile of the series itself, which is what summary.json's p99 is.
// Skips without the binaries unless TAILGATE_REQUIRE_PROMTOOL=1.
func TestRunNativeHistogramOnRealPrometheus(t *testing.T) {
	promtest.Tool(t, "prometheus")
	if testing.Short() {
		t.Skip("starts Prometheus and a Pushgateway: not in -short")
	}
	pgAddr := promtest.StartPushgateway(t)
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL, cfg.Jitter = 20*time.Millisecond, time.Millisecond, 15*time.Millisecond
	srv := simtest.Start(t, cfg)
	sloFile := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(sloFile, []byte(ttftSLO), 0o644)
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "100", "--arrival", "constant",
		"--duration", "1s", "--max-tokens", "4", "--out", dir, "--slo", sloFile, "--push", "http://"+pgAddr,
		"--push-histograms", "native")
	if code == slo.ExitUsage || code == slo.ExitInvalid {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, dir)
	want := s.LatencyMs[measure.MetricTTFT]
	// The run's own series only, by its target label: a port is free when
	// picked but not held, so another test's Pushgateway may answer too.
	host := strings.TrimPrefix(srv.URL, "http://")
	p := promtest.Start(t, promtest.Options{Target: pgAddr, Job: "pushgateway", Native: true})
	promtest.WaitFor(t, 30*time.Second, "the pushed TTFT histogram in Prometheus", func() bool {
		return len(p.Query(t, fmt.Sprintf(`histogram_count(sum(%s{job="tailgate",target=%q}))`, prom.TTFTSeconds, host))) == 1
	})
	if got := p.Query(t, fmt.Sprintf(`histogram_count(sum(%s{job="tailgate",target=%q}))`, prom.TTFTSeconds, host)); len(got) != 1 || got[0].Value != float64(want.Count) {
		t.Errorf("native TTFT count in Prometheus %v, summary %d; series %v", got, want.Count,
			p.Query(t, fmt.Sprintf(`histogram_count(%s{job="tailgate",target=%q})`, prom.TTFTSeconds, host)))
	}
	got := p.Query(t, fmt.Sprintf(`histogram_quantile(0.99, sum(%s{job="tailgate",target=%q}))`, prom.TTFTSeconds, host))
	if len(got) != 1 {
		t.Fatalf("histogram_quantile: %v", got)
	}
	// Prometheus interpolates within the bucket, so its answer and the
	// summary's lie in one bucket of width factor 2^(1/8) < 1.1.
	p99 := want.P99 / 1e3
	if r := got[0].Value / p99; r > 1.1 || r < 1/1.1 || math.IsNaN(r) {
		t.Errorf("histogram_quantile(0.99) %.6fs, summary TTFT p99 %.6fs: ratio %.4f, beyond the factor 1.1", got[0].Value, p99, r)
	}
	t.Logf("TTFT p99: Prometheus %.3f ms, summary %.3f ms", got[0].Value*1e3, want.P99)
	if classic := p.Query(t, fmt.Sprintf(`%s_bucket{target=%q}`, prom.TTFTSeconds, host)); len(classic) != 0 {
		t.Errorf("native mode: %d classic _bucket series stored", len(classic))
	}
}
