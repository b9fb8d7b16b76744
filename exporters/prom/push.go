package prom

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	dto "github.com/prometheus/client_model/go"

	"github.com/tailgate-llm/tailgate/internal/redact"
)

// Job is the Pushgateway job name of pushed runs.
const Job = "tailgate"

// PushTimeout bounds one push.
const PushTimeout = 30 * time.Second

// Push sends g's metrics to the Pushgateway at url as job "tailgate",
// grouped by target, replacing what that group held (HTTP PUT): a
// scheduled run's final figures replace the previous run's. The target
// label moves from the series into the grouping key, because the
// Pushgateway refuses series that carry a grouping label themselves;
// scraped with honor_labels: true they carry it again, so the names and
// labels are the canary's. client nil means http.DefaultClient.
func Push(ctx context.Context, url, target string, g prometheus.Gatherer, client *http.Client) error {
	ctx, cancel := context.WithTimeout(ctx, PushTimeout)
	defer cancel()
	p := push.New(url, Job).Grouping(LabelTarget, target).Gatherer(withoutLabel(g, LabelTarget))
	if client != nil {
		p = p.Client(client)
	}
	if err := p.PushContext(ctx); err != nil {
		return fmt.Errorf("push to %s: %s", redact.URL(url), redact.Text(err.Error()))
	}
	return nil
}

// withoutLabel gathers g and drops label name from every series.
func withoutLabel(g prometheus.Gatherer, name string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				kept := m.Label[:0]
				for _, l := range m.Label {
					if l.GetName() != name {
						kept = append(kept, l)
					}
				}
				m.Label = kept
			}
		}
		return mfs, err
	})
}
