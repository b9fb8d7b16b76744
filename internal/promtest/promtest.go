// Package promtest runs Debian's Prometheus tools for tests: promtool, a
// real Prometheus on loopback with a query helper, and Alertmanager. Without them a test
// skips, unless TAILGATE_REQUIRE_PROMTOOL=1 (CI installs the prometheus
// package, which brings both), where a missing tool fails it.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/syncbuf"
)

// RequireEnv names the variable that, set to 1, makes a missing tool a failure rather than a skip.
const RequireEnv = "TAILGATE_REQUIRE_PROMTOOL"

// Tool returns the path of name (promtool, prometheus), or skips or fails
// t when it is not installed.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s not found and %s=1: apt-get install -y prometheus", name, RequireEnv)
	}
	t.Skipf("%s not found (apt-get install -y prometheus); set %s=1 to fail instead", name, RequireEnv)
	return ""
}

// Promtool is Tool(t, "promtool").
func Promtool(t testing.TB) string { t.Helper(); return Tool(t, "promtool") }

// Options configure a Prometheus for a test.
type Options struct {
	// Target is the host:port scraped (path /metrics) every second, as job
	// Job ("tailgate" when empty), with honor_labels (pushed-style series
	// keep their own labels).
	Target, Job string
	// RuleFiles are loaded and evaluated every second.
	RuleFiles []string
	// Native turns on --enable-feature=native-histograms.
	Native bool
	// Alertmanager, if set, is the host:port alerts go to.
	Alertmanager string
	// Pushgateway, if set, is a Pushgateway's host:port, scraped too as
	// job "pushgateway" with honor_labels (pushed series keep their job).
	Pushgateway string
}

// Server is a running Prometheus.
type Server struct {
	URL string
	Job string
}

// Start runs Prometheus on a free loopback port and stops it when the test
// ends; its log is printed if the test failed. It returns once Prometheus
// is ready (not yet once it has scraped: see WaitScrapes).
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Tool(t, "prometheus")
	if o.Job == "" {
		o.Job = "tailgate"
	}
	dir := t.TempDir()
	rules := " []"
	if len(o.RuleFiles) > 0 {
		rules = ""
		for _, f := range o.RuleFiles {
			rules += "\n  - " + strconv.Quote(f)
		}
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files:%s
scrape_configs:
  - job_name: %q
    honor_labels: true
    static_configs:
      - targets: [%q]
`, rules, o.Job, o.Target)
	if o.Pushgateway != "" {
		cfg += fmt.Sprintf("  - job_name: pushgateway\n    honor_labels: true\n    static_configs:\n      - targets: [%q]\n", o.Pushgateway)
	}
	if o.Alertmanager != "" {
		cfg += fmt.Sprintf("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", o.Alertmanager)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	args := []string{"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--log.level=warn"}
	if o.Native {
		args = append(args, "--enable-feature=native-histograms")
	}
	s := &Server{URL: "http://" + addr, Job: o.Job}
	run(t, "prometheus", bin, args, s.URL+"/-/ready")
	return s
}

// freeAddr is a loopback host:port nothing listens on just now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// AlertmanagerTool is the Alertmanager binary: alertmanager, or Debian's
// prometheus-alertmanager (package prometheus-alertmanager).
func AlertmanagerTool(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"alertmanager", "prometheus-alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("alertmanager not found and %s=1: apt-get install -y prometheus-alertmanager", RequireEnv)
	}
	t.Skipf("alertmanager not found (apt-get install -y prometheus-alertmanager); set %s=1 to fail instead", RequireEnv)
	return ""
}

// PushgatewayTool is the Pushgateway binary: pushgateway, or Debian's
// prometheus-pushgateway.
func PushgatewayTool(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"pushgateway", "prometheus-pushgateway"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("pushgateway not found and %s=1: apt-get install -y prometheus-pushgateway", RequireEnv)
	}
	t.Skipf("pushgateway not found (apt-get install -y prometheus-pushgateway); set %s=1 to fail instead", RequireEnv)
	return ""
}

// StartPushgateway runs a Pushgateway on a free loopback port (no
// persistence) and stops it when the test ends; it returns host:port once
// it is ready.
func StartPushgateway(t testing.TB) string {
	t.Helper()
	bin := PushgatewayTool(t)
	addr := freeAddr(t)
	run(t, "pushgateway", bin, []string{"--web.listen-address=" + addr, "--log.level=warn"}, "http://"+addr+"/-/ready")
	return addr
}

// StartAlertmanager runs Alertmanager with config (YAML) on a free
// loopback port, clustering off, and stops it when the test ends. It
// returns host:port once Alertmanager is ready.
func StartAlertmanager(t testing.TB, config []byte) string {
	t.Helper()
	bin := AlertmanagerTool(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfgPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	run(t, "alertmanager", bin, []string{"--config.file=" + cfgPath, "--storage.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--cluster.listen-address=", "--log.level=warn"}, "http://"+addr+"/-/ready")
	return addr
}

// run starts bin, stops it (interrupt, then kill) when the test ends and
// prints its log if the test failed, and waits until ready answers 200.
func run(t testing.TB, name, bin string, args []string, ready string) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s: %v\n%s", name, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitScrapes waits until Prometheus has scraped its target n times
// successfully (so a rate over the last n seconds has samples).
func (s *Server) WaitScrapes(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	q := fmt.Sprintf(`sum_over_time(up{job=%q}[1m]) >= %d`, s.Job, n)
	WaitFor(t, timeout, fmt.Sprintf("%d successful scrapes of %s", n, s.Job), func() bool {
		return len(s.Query(t, q)) == 1
	})
}

// WaitScrapeAfter waits until Prometheus holds a sample of job (s.Job,
// or "pushgateway") from a scrape that began after instant (a sample
// carries its scrape's start), so what it stores was read after instant.
func (s *Server) WaitScrapeAfter(t testing.TB, job string, instant time.Time, timeout time.Duration) {
	t.Helper()
	// timestamp() of a bare selector: of an expression (up == 1) it
	// would be the query's own time.
	q := fmt.Sprintf(`timestamp(up{job=%q})`, job)
	after := float64(instant.UnixMilli()) / 1e3
	WaitFor(t, timeout, fmt.Sprintf("a scrape of %s after %s", job, instant.Format(time.RFC3339Nano)), func() bool {
		v := s.Query(t, q)
		return len(v) == 1 && v[0].Value > after
	})
}

// Sample is one element of an instant-vector result.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// Query runs an instant query and returns its vector (a scalar result is
// one Sample without labels). A query Prometheus refuses fails t.
func (s *Server) Query(t testing.TB, expr string) []Sample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s", expr, body.Error)
	}
	var raw []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	switch body.Data.ResultType {
	case "vector":
		if err := json.Unmarshal(body.Data.Result, &raw); err != nil {
			t.Fatalf("query %s: %v", expr, err)
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(body.Data.Result, &v); err != nil {
			t.Fatalf("query %s: %v", expr, err)
		}
		raw = append(raw, struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}{Value: v})
	default:
		t.Fatalf("query %s: result type %s, want a vector or scalar", expr, body.Data.ResultType)
	}
	out := make([]Sample, 0, len(raw))
	for _, r := range raw {
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("query %s: value %q: %v", expr, str, err)
		}
		out = append(out, Sample{Metric: r.Metric, Value: v})
	}
	return out
}

// WaitFor polls cond every 250 ms until it holds, failing t after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: no %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
