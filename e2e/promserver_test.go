package e2e

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
)

// promServer is a real Prometheus (Debian's package) on loopback.
type promServer struct {
	URL string
	log string
}

// needPrometheus skips the test when the prometheus binary is missing,
// unless TAILGATE_REQUIRE_PROMTOOL=1 (CI installs it), then it fails.
func needPrometheus(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("TAILGATE_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("prometheus is not installed and TAILGATE_REQUIRE_PROMTOOL=1 (apt-get install -y prometheus)")
		}
		t.Skip("prometheus is not installed (apt-get install -y prometheus); skipping")
	}
	return bin
}

// startPrometheus runs Prometheus scraping target (host:port, path
// /metrics) every second with the given rule files, evaluated every
// second, and stops it at the end of the test.
func startPrometheus(t *testing.T, target string, ruleFiles []string, features ...string) *promServer {
	t.Helper()
	bin := needPrometheus(t)
	dir := t.TempDir()
	rules := " []"
	if len(ruleFiles) > 0 {
		rules = ""
		for _, f := range ruleFiles {
			rules += "\n  - " + strconv.Quote(f)
		}
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files:%s
scrape_configs:
  - job_name: tailgate
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--log.level=warn"}
	for _, f := range features {
		args = append(args, "--enable-feature="+f)
	}
	logPath := filepath.Join(dir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &promServer{URL: "http://" + addr, log: logPath}
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
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("prometheus log:\n%s", b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("prometheus not ready after 30s: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promSample is one element of an instant-vector query result.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query and returns its vector.
func (p *promServer) query(t *testing.T, expr string) []promSample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s", expr, body.Error)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %q: %v", expr, s, err)
		}
		out = append(out, promSample{Metric: r.Metric, Value: v})
	}
	return out
}

// waitFor polls cond every 500 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
