package dashboards

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tailgate-llm/tailgate/internal/promtest"
)

// A real Prometheus (Debian's 2.42) scrapes histograms that have both a
// classic and a native form, once with --enable-feature=native-histograms
// and once without. The fact the dashboards are built for holds: with the
// feature only the native form is stored, without it only the classic one;
// and the dashboards' latency queries answer either way. Skips without a
// prometheus binary, unless TAILGATE_REQUIRE_PROMTOOL=1 (the same Debian
// package brings both).
func TestLatencyQueriesAnswerOnRealPrometheus(t *testing.T) {
	promtest.Tool(t, "prometheus")
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
			prom := promtest.Start(t, promtest.Options{Target: exporter.Listener.Addr().String(), Job: "canary", Native: mode.feature})
			// Four scrapes of the target: rate over 30s has samples.
			prom.WaitScrapes(t, 4, 30*time.Second)
			classic := len(prom.Query(t, "tailgate_ttft_seconds_bucket")) > 0
			if classic == mode.feature {
				t.Errorf("native-histograms %v: classic _bucket series stored: %v", mode.feature, classic)
			}
			for _, q := range queries {
				e := strings.NewReplacer("$__rate_interval", "30s", `"$target"`, `"a"`, `"$class"`, `"chat"`).Replace(q.text)
				if got := prom.Query(t, e); len(got) == 0 {
					t.Errorf("%s: no answer\n  %s", q.where, e)
				}
			}
		})
	}
}
