package results

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/theater"
)

// The metric-theater section is written under metric_theater and, since
// keys are never renamed, under its first key capacity too; a file
// written before metric_theater (capacity only) still loads it.
func TestSummaryMetricTheaterKeys(t *testing.T) {
	t.Parallel()
	d := Dir(t.TempDir())
	s := &Summary{MetricTheater: &theater.Section{Rule: "r", BucketS: 10, MetricTheater: true, Flagged: 1,
		Buckets: []theater.Bucket{{FromS: 0, ToS: 10, Flag: true, Why: "busy"}}}}
	s.Schema = schema.SummarySchema
	if err := d.WriteSummary(s); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(d.Path(SummaryFile))
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	if string(keys["metric_theater"]) == "" || string(keys["metric_theater"]) != string(keys["capacity"]) {
		t.Errorf("metric_theater %s, capacity %s: want the section under both keys", keys["metric_theater"], keys["capacity"])
	}
	got, err := d.ReadSummary()
	if err != nil {
		t.Fatal(err)
	}
	if got.MetricTheater == nil || got.MetricTheater.Flagged != 1 || got.CapacityAlias != nil {
		t.Errorf("read back: metric theater %+v, alias %+v", got.MetricTheater, got.CapacityAlias)
	}

	// A summary.json of the first form: the section under capacity only.
	delete(keys, "metric_theater")
	old, _ := json.Marshal(keys)
	os.WriteFile(d.Path(SummaryFile), old, 0o644)
	got, err = d.ReadSummary()
	if err != nil {
		t.Fatal(err)
	}
	if got.MetricTheater == nil || !got.MetricTheater.MetricTheater || len(got.MetricTheater.Buckets) != 1 || got.MetricTheater.Buckets[0].Why != "busy" {
		t.Errorf("old file: metric theater %+v, want the capacity key's section", got.MetricTheater)
	}

	// Without telemetry there is no section, under either key.
	if err := d.WriteSummary(&Summary{}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(d.Path(SummaryFile))
	keys = nil
	json.Unmarshal(b, &keys)
	if _, ok := keys["capacity"]; ok {
		t.Errorf("no section: capacity key written")
	}
	if _, ok := keys["metric_theater"]; ok {
		t.Errorf("no section: metric_theater key written")
	}
	if _, ok := keys["schema"]; !ok {
		t.Errorf("the embedded summary's keys are lost: %s", b)
	}
}
