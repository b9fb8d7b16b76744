package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A real Prometheus (Debian's 2.42) scrapes histograms that have both a
// classic and a native form, once with --enable-feature=native-histograms
// and once without. The fact the dashboards are built for holds: with the
// feature only the native form is stored, without it only the classic one;
// and the dashboards' latency queries answer either way. Skips without a
// prometheus binary, unless TAILGATE_REQUIRE_PROMTOOL=1 (the same Debian
// package brings both).
func TestLatencyQueriesAnswerOnRealPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("TAILGATE_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("prometheus not found and TAILGATE_REQUIRE_PROMTOOL=1: apt-get install prometheus")
		}
		t.Skip("prometheus not found (apt-get install prometheus)")
	}
	if testing.Short() {
		t.Skip("starts Prometheus twice: not in -short")
	}
	// The canary's histograms as the Prometheus sink exposes them: classic
	// buckets and native, both.
	reg := prometheus.NewRegistry()
	var hs []*prometheus.HistogramVec
	for _, m := range []string{"tailgate_ttft_seconds", "tailgate_itl_seconds", "tailgate_tpot_seconds", "tailgate_e2e_seconds"} {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: m, Help: m,
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5}, NativeHistogramBucketFactor: 1.1}, []string{"target", "class"})
		reg.MustRegister(h)
		hs = append(hs, h)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { // a steady trickle of observations, so rates are not zero
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				for _, h := range hs {
					h.WithLabelValues("a", "chat").Observe(0.02 + float64(i%10)*0.01)
				}
			}
		}
	}()
	exporter := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer exporter.Close()

	var queries []expr
	for _, name := range Names() {
		for _, e := range load(t, name).exprs(name) {
			if strings.Contains(e.text, "histogram_quantile") && strings.Contains(e.text, "tailgate_") {
				queries = append(queries, e)
			}
		}
	}
	if len(queries) < 13 {
		t.Fatalf("%d latency queries", len(queries))
	}
	for _, mode := range []struct {
		name    string
		feature bool
	}{{"native-histograms", true}, {"classic", false}} {
		t.Run(mode.name, func(t *testing.T) {
			prom := startPrometheus(t, bin, exporter.Listener.Addr().String(), mode.feature)
			classic := len(query(t, prom, "tailgate_ttft_seconds_bucket")) > 0
			if classic == mode.feature {
				t.Errorf("native-histograms %v: classic _bucket series stored: %v", mode.feature, classic)
			}
			for _, q := range queries {
				e := strings.NewReplacer("$__rate_interval", "30s", `"$target"`, `"a"`, `"$class"`, `"chat"`).Replace(q.text)
				if got := query(t, prom, e); len(got) == 0 {
					t.Errorf("%s: no answer\n  %s", q.where, e)
				}
			}
		})
	}
}

// startPrometheus runs Prometheus on loopback scraping target every second
// and returns its URL once it has scraped a few times.
func startPrometheus(t *testing.T, bin, target string, native bool) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: canary\n    static_configs: [{targets: [%q]}]\n", target)
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"--config.file=" + filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--log.level=warn"}
	if native {
		args = append(args, "--enable-feature=native-histograms")
	}
	cmd := exec.Command(bin, args...)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		// Four scrapes of the target: rate over 30s has samples.
		if r := query(t, base, `count_over_time(up{job="canary"}[1m]) >= 4`); len(r) == 1 {
			return base
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("prometheus on %s did not scrape in 30s:\n%s", addr, logs.String())
	return ""
}

type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query; an unreachable Prometheus reads as no
// result (startPrometheus polls through it).
func query(t *testing.T, base, q string) []sample {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []sample
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	return r.Data.Result
}
