package canary

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/internal/promtest"
	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

const canaryFile = `
kind: Canary
apiVersion: tailgate/v1
listen: 127.0.0.1:0
evaluation_interval: 200ms
slo: slo.yaml
targets:
  - name: sim
    url: %s
    model: sim-llama-8b
    max_tokens: 8
    timeout: %s
    schedule: {rate: %d}
%s`

// downTarget is a target nothing listens on: every probe fails to connect.
const downTarget = `  - name: down
    url: http://127.0.0.1:1
    model: m
    timeout: 1s
    schedule: {interval: 100ms, jitter: 20ms}
`

// startCanary runs a daemon on a canary file written for srvURL and stops
// it when the test ends, failing the test if it does not stop in time.
func startCanary(t *testing.T, body string) (*Daemon, string, *eventLog) {
	t.Helper()
	return startCanaryWith(t, body, Options{})
}

// startCanaryWith is startCanary with opts; Version, Log and StopTimeout
// are the test's.
func startCanaryWith(t *testing.T, body string, opts Options) (*Daemon, string, *eventLog) {
	t.Helper()
	dir := writeFiles(t, map[string]string{"canary.yaml": body, "slo.yaml": sloFile})
	path := filepath.Join(dir, "canary.yaml")
	logs := newEventLog()
	opts.Version, opts.Log, opts.StopTimeout = "test", logs, 3*time.Second
	d, err := New(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		done := make(chan error, 1)
		go func() { done <- d.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Wait: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the daemon did not stop within 10s of its context ending")
		}
	})
	return d, path, logs
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return b
}

// scrape parses /metrics as Prometheus does (text exposition).
func scrape(t *testing.T, d *Daemon) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	body := get(t, "http://"+d.Addr()+"/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return fams, body
}

// total sums the samples of name whose labels include want.
func total(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	mf := fams[name]
	if mf == nil {
		return 0
	}
	var sum float64
	for _, m := range mf.Metric {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func status(t *testing.T, d *Daemon) Status {
	t.Helper()
	var s Status
	if err := json.Unmarshal(get(t, "http://"+d.Addr()+"/status"), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func objective(t *testing.T, s Status, target, name string) ObjectiveStatus {
	t.Helper()
	for _, ts := range s.Targets {
		if ts.Name != target {
			continue
		}
		for _, o := range ts.Objectives {
			if o.Name == name {
				return o
			}
		}
	}
	t.Fatalf("no objective %s/%s in /status", target, name)
	return ObjectiveStatus{}
}

func window(o ObjectiveStatus, label string) WindowStatus {
	for _, w := range o.Windows {
		if w.Window == label {
			return w
		}
	}
	return WindowStatus{}
}

// eventLog is a daemon's log that says when a line was written: every
// evaluation interval writes one, so a test re-checks its condition on
// the daemon's own progress instead of polling on a timer.
type eventLog struct {
	syncbuf.Buffer
	lines chan struct{}
}

func newEventLog() *eventLog { return &eventLog{lines: make(chan struct{}, 1)} }

func (l *eventLog) Write(p []byte) (int, error) {
	n, err := l.Buffer.Write(p)
	select {
	case l.lines <- struct{}{}:
	default: // one pending wake-up is enough: the condition is re-read whole
	}
	return n, err
}

// waitFor checks cond now and again after each line the daemon logs,
// until it holds; it fails the test if d passes first.
func waitFor(t *testing.T, logs *eventLog, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !waitUntil(logs, d, cond) {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// waitUntil is waitFor saying whether cond came to hold within d.
func waitUntil(logs *eventLog, d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-logs.lines:
		case <-deadline.C:
			return false
		}
	}
	return true
}

func fastSim() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, time.Millisecond
	return cfg
}

// A canary against the simulator: /metrics parses, every probe is one
// error_rate event and one ttft event, the healthy target's budgets are
// untouched, the down target burns them and the daemon goes on; then
// fault injection turns the simulator's events bad and /status shows the
// burn.
func TestCanaryAgainstSimulator(t *testing.T) {
	srv := simtest.Start(t, fastSim())
	d, _, logs := startCanary(t, fmt.Sprintf(canaryFile, srv.URL, "2s", 20, downTarget))
	get(t, "http://"+d.Addr()+"/healthz")
	get(t, "http://"+d.Addr()+"/readyz")

	simT := map[string]string{"target": "sim"}
	waitFor(t, logs, 5*time.Second, "20 probes of sim", func() bool {
		fams, _ := scrape(t, d)
		return total(fams, prom.RequestsTotal, simT) >= 20
	})
	// Probes go on while /metrics is gathered, family by family: a scrape
	// may fall between one record's counters, so compare on a scrape
	// where they agree (one gathered between two records), within a few
	// tries. ITL: one observation per token after the first.
	var fams map[string]*dto.MetricFamily
	var body []byte
	var reqs, okReqs, errEvents, ttftEvents, ttfts, itls float64
	agree := false
	for try := 0; try < 20 && !agree; try++ {
		fams, body = scrape(t, d)
		reqs = total(fams, prom.RequestsTotal, simT)
		okReqs = total(fams, prom.RequestsTotal, map[string]string{"target": "sim", "outcome": "ok"})
		errEvents = total(fams, prom.SLOEventsTotal, map[string]string{"target": "sim", "objective": "errors"})
		ttftEvents = total(fams, prom.SLOEventsTotal, map[string]string{"target": "sim", "objective": "ttft"})
		ttfts, itls = total(fams, prom.TTFTSeconds, simT), total(fams, prom.ITLSeconds, simT)
		agree = errEvents == reqs && ttftEvents == reqs && ttfts == okReqs && itls == 7*okReqs
	}
	if !agree {
		t.Fatalf("never a scrape where each probe of 8 tokens is one errors and one ttft event, one TTFT and 7 ITL "+
			"observations (last: %v requests, %v ok, %v errors events, %v ttft events, %v TTFT, %v ITL)\n%s",
			reqs, okReqs, errEvents, ttftEvents, ttfts, itls, body)
	}
	if okReqs != reqs {
		t.Errorf("%v of %v probes of the healthy simulator succeeded", okReqs, reqs)
	}
	if bad := total(fams, prom.SLOEventsTotal, map[string]string{"target": "sim", "outcome": "bad"}); bad != 0 {
		t.Errorf("healthy simulator: %v bad events", bad)
	}
	if v := total(fams, prom.SLOBurnRate, map[string]string{"target": "sim", "objective": "errors", "window": "5m"}); v != 0 {
		t.Errorf("healthy simulator: errors burn rate %v", v)
	}
	if v := total(fams, prom.SLOErrorBudgetRemainingRatio, map[string]string{"target": "sim", "objective": "errors"}); v != 1 {
		t.Errorf("healthy simulator: budget remaining %v", v)
	}
	// The down target: connect errors, bad events for every objective.
	down := map[string]string{"target": "down"}
	if v := total(fams, prom.RequestErrorsTotal, map[string]string{"target": "down", "kind": "connect"}); v == 0 {
		t.Errorf("down target: no connect errors\n%s", body)
	}
	if v := total(fams, prom.SLOEventsTotal, map[string]string{"target": "down", "objective": "ttft", "outcome": "good"}); v != 0 {
		t.Errorf("down target: %v good ttft events", v)
	}
	if v := total(fams, prom.SLOBurnRate, map[string]string{"target": "down", "objective": "ttft", "window": "5m"}); v != 100 {
		t.Errorf("down target: ttft burn 5m = %v, want 100 (all bad against a 1%% budget)", v)
	}
	if total(fams, prom.LastSuccessTimestampSeconds, down) != 0 {
		t.Errorf("down target has a last success")
	}
	// Objectives a canary cannot judge have no event series, and say why.
	if v := total(fams, prom.SLOEventsTotal, map[string]string{"objective": "queue"}); v != 0 {
		t.Errorf("queue_delay has events")
	}
	s := status(t, d)
	if len(s.Targets) != 2 || len(s.Targets[0].NotJudged) != 2 {
		t.Fatalf("/status targets %+v", s.Targets)
	}
	if !strings.Contains(logs.String(), "not judged by the canary") {
		t.Errorf("no warning about queue_delay and floors in the log:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "canary: evaluation |"); n < 2 {
		t.Errorf("%d evaluation lines in the log, want one per 200ms interval", n)
	}

	// Fault injection: every request fails with 503.
	if err := srv.SetFaults([]sim.FaultRule{{Kind: sim.FaultHTTP503, Rate: 1}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, logs, 5*time.Second, "bad events of the faulted simulator in /status", func() bool {
		w := window(objective(t, status(t, d), "sim", "errors"), "5m")
		return w.Bad >= 10
	})
	s = status(t, d)
	errs, ttft := objective(t, s, "sim", "errors"), objective(t, s, "sim", "ttft")
	if w := window(errs, "5m"); w.BurnRate <= 1 || w.ErrorRatio <= 0 {
		t.Errorf("errors 5m window after faults: %+v, want burn > 1", w)
	}
	if w := window(ttft, "5m"); w.Bad == 0 {
		t.Errorf("ttft 5m window after faults: %+v; failed probes must burn latency budgets", w)
	}
	if errs.BudgetRemaining >= 1 || errs.SLOWindow.Bad == 0 {
		t.Errorf("errors budget after faults: %v (%+v)", errs.BudgetRemaining, errs.SLOWindow)
	}
	fams, _ = scrape(t, d)
	if v := total(fams, prom.RequestErrorsTotal, map[string]string{"target": "sim", "kind": "server_error"}); v == 0 {
		t.Errorf("no server_error counted")
	}
	if v := total(fams, prom.SLOBurnRate, map[string]string{"target": "sim", "objective": "errors", "window": "5m"}); v <= 1 {
		t.Errorf("errors burn rate gauge %v after faults", v)
	}
}

// `promtool check metrics` on the canary's /metrics, every family present
// (a healthy and a down target, errors, reload gauges): nothing to report.
// Without promtool the test is skipped, unless TAILGATE_REQUIRE_PROMTOOL=1
// (CI installs Debian's prometheus package), when it fails.
func TestMetricsPassPromtool(t *testing.T) {
	path := promtest.Promtool(t)
	srv := simtest.Start(t, fastSim())
	// A state file, so the state-write timestamp has its series too.
	d, _, logs := startCanaryWith(t, fmt.Sprintf(canaryFile, srv.URL, "2s", 20, downTarget),
		Options{StateFile: filepath.Join(t.TempDir(), "state.json")})
	// A family appears with its first series: wait for a scrape that has
	// them all (one gathered mid-record may have a probe's request counted
	// and not yet its tokens).
	var body []byte
	var missing []string
	if !waitUntil(logs, 5*time.Second, func() bool {
		var fams map[string]*dto.MetricFamily
		fams, body = scrape(t, d)
		missing = missing[:0]
		for _, name := range prom.Names() {
			if !bytes.Contains(body, []byte("# TYPE "+name+" ")) {
				missing = append(missing, name)
			}
		}
		return total(fams, prom.RequestsTotal, map[string]string{"outcome": "ok"}) > 0 &&
			total(fams, prom.RequestErrorsTotal, nil) > 0 && len(missing) == 0
	}) {
		t.Fatalf("no /metrics with probes of both targets and every family within 5s; lacking %v", missing)
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// A slow target: probes that outlive the timeout are bad events.
func TestCanarySlowTarget(t *testing.T) {
	cfg := fastSim()
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHang, Rate: 1}}
	srv := simtest.Start(t, cfg)
	d, _, logs := startCanary(t, fmt.Sprintf(canaryFile, srv.URL, "300ms", 10, ""))
	waitFor(t, logs, 5*time.Second, "timed-out probes", func() bool {
		w := window(objective(t, status(t, d), "sim", "ttft"), "5m")
		return w.Bad >= 3
	})
	s := status(t, d)
	if o := objective(t, s, "sim", "ttft"); window(o, "5m").Good != 0 {
		t.Errorf("hanging target has good ttft events: %+v", o)
	}
	if !strings.HasPrefix(s.Targets[0].LastErrorText, "timeout") {
		t.Errorf("last error %q, want a timeout", s.Targets[0].LastErrorText)
	}
}

// Shutdown with probes hanging in flight ends within its bound, without
// counting them: they time out only after a minute, so every failure
// counted would be one the canary cancelled.
func TestCanaryShutdownWithProbesInFlight(t *testing.T) {
	cfg := fastSim()
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHang, Rate: 1}}
	srv := simtest.Start(t, cfg)
	dir := writeFiles(t, map[string]string{"canary.yaml": fmt.Sprintf(canaryFile, srv.URL, "1m", 10, ""), "slo.yaml": sloFile})
	logs := newEventLog()
	d, err := New(filepath.Join(dir, "canary.yaml"), Options{Log: logs, StopTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, logs, 5*time.Second, "3 probes hanging in the simulator", func() bool { return srv.InFlight() >= 3 })
	start := time.Now()
	cancel()
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("shutdown took %s with probes in flight (stop timeout 3s)", el)
	}
	if p := d.Status().Targets[0].Probes; p.Failed != 0 || p.OK != 0 {
		t.Errorf("probes after shutdown %+v: the cancelled ones were counted (last: %q)", p, d.Status().Targets[0].LastErrorText)
	}
	if _, err := http.Get("http://" + d.Addr() + "/healthz"); err == nil {
		t.Error("still serving after Wait")
	}
}

// Reload: an invalid file keeps the running configuration and sets the
// reload gauge to 0; a valid one applies, keeps the windows of the
// objectives that remain and sets the gauge back to 1.
func TestCanaryReload(t *testing.T) {
	srv := simtest.Start(t, fastSim())
	d, path, logs := startCanary(t, fmt.Sprintf(canaryFile, srv.URL, "2s", 20, ""))
	waitFor(t, logs, 5*time.Second, "probes", func() bool {
		return window(objective(t, status(t, d), "sim", "errors"), "5m").Good >= 5
	})
	gauge := func() float64 {
		fams, _ := scrape(t, d)
		return total(fams, prom.ConfigLastReloadSuccessful, nil)
	}
	if g := gauge(); g != 1 {
		t.Fatalf("reload gauge %v at start, want 1", g)
	}

	// Invalid: a bad schedule. The old config keeps probing.
	os.WriteFile(path, []byte(strings.Replace(fmt.Sprintf(canaryFile, srv.URL, "2s", 20, ""), "rate: 20", "rate: -1", 1)), 0o644)
	err := d.Reload()
	if err == nil || !strings.Contains(err.Error(), "canary.yaml:13: targets[0].schedule.rate") {
		t.Fatalf("Reload of an invalid file: %v", err)
	}
	if g := gauge(); g != 0 {
		t.Errorf("reload gauge %v after a failed reload, want 0", g)
	}
	s := status(t, d)
	if s.Config.LastReloadSuccessful || !strings.Contains(s.Config.LastReloadError, "schedule.rate") {
		t.Errorf("/status config after a failed reload: %+v", s.Config)
	}
	if !strings.Contains(logs.String(), "reload failed, keeping the running configuration") {
		t.Errorf("failed reload not logged:\n%s", logs.String())
	}
	n := s.Targets[0].Probes.OK
	waitFor(t, logs, 5*time.Second, "probes after the failed reload", func() bool {
		return status(t, d).Targets[0].Probes.OK > n+3
	})

	// Valid: a new rate and one objective fewer.
	good := window(objective(t, status(t, d), "sim", "errors"), "5m").Good
	os.WriteFile(path, []byte(fmt.Sprintf(canaryFile, srv.URL, "2s", 10, "")), 0o644)
	os.WriteFile(filepath.Join(filepath.Dir(path), "slo.yaml"), []byte(strings.Replace(sloFile,
		"  - {name: itl, metric: itl, threshold: 1s, target: 95%}\n", "", 1)), 0o644)
	if err := d.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if g := gauge(); g != 1 {
		t.Errorf("reload gauge %v after a good reload, want 1", g)
	}
	s = status(t, d)
	if !s.Config.LastReloadSuccessful || s.Targets[0].Schedule != "10/s" {
		t.Errorf("after reload: %+v, schedule %s", s.Config, s.Targets[0].Schedule)
	}
	if w := window(objective(t, s, "sim", "errors"), "5m"); w.Good < good {
		t.Errorf("errors window after reload %+v: lost the %d good events before it", w, good)
	}
	for _, o := range s.Targets[0].Objectives {
		if o.Name == "itl" {
			t.Errorf("itl still judged after it left the SLO")
		}
	}
	fams, _ := scrape(t, d)
	if v := total(fams, prom.SLOEventsTotal, map[string]string{"objective": "itl"}); v != 0 || fams[prom.SLOEventsTotal] == nil {
		t.Errorf("itl series linger after reload")
	}
	for _, m := range fams[prom.SLOEventsTotal].Metric {
		for _, l := range m.Label {
			if l.GetValue() == "itl" {
				t.Errorf("itl series linger after reload: %v", m)
			}
		}
	}
}

// web_config (exporter-toolkit): basic auth guards /metrics, /status and
// the index; /healthz and /readyz answer without credentials (kubelet
// probes carry none), and a path that only cleans to a probe's is guarded.
func TestWebConfigBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	srv := simtest.Start(t, fastSim())
	body := strings.Replace(fmt.Sprintf(canaryFile, srv.URL, "2s", 5, ""), "listen: 127.0.0.1:0\n",
		"listen: 127.0.0.1:0\nweb_config: web.yml\n", 1)
	dir := writeFiles(t, map[string]string{"canary.yaml": body, "slo.yaml": sloFile,
		"web.yml": "basic_auth_users:\n  prometheus: " + string(hash) + "\n"})
	d, err := New(filepath.Join(dir, "canary.yaml"), Options{Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); d.Wait() }()
	for _, c := range []struct {
		user, pass string
		want       int
	}{{"", "", http.StatusUnauthorized}, {"prometheus", "wrong", http.StatusUnauthorized}, {"prometheus", "s3cret", http.StatusOK}} {
		for _, path := range []string{"/metrics", "/status", "/"} {
			if code := getAs(t, "http://"+d.Addr()+path, c.user, c.pass); code != c.want {
				t.Errorf("%s as %q/%q: %d, want %d", path, c.user, c.pass, code, c.want)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code := getAs(t, "http://"+d.Addr()+path, "", ""); code != http.StatusOK {
			t.Errorf("%s without credentials: %d, want 200", path, code)
		}
	}
	// A path that cleans to /metrics is not a probe's: guarded.
	conn, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz/../metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/healthz/../metrics without credentials: %d, want 401", resp.StatusCode)
	}
}

// getAs GETs url with basic auth (none when user is "") and returns the
// status code.
func getAs(t *testing.T, url, user, pass string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// selfSigned writes a certificate and key for 127.0.0.1 into dir.
func selfSigned(t *testing.T, dir string) (certPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tailgate-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644)
	os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certPEM
}

// web_config with TLS: /metrics over HTTPS. A server that cannot start
// (its key gone between load and start) shuts the daemon down with the
// error instead of probing unseen.
func TestWebConfigTLS(t *testing.T) {
	srv := simtest.Start(t, fastSim())
	body := strings.Replace(fmt.Sprintf(canaryFile, srv.URL, "2s", 5, ""), "listen: 127.0.0.1:0\n",
		"listen: 127.0.0.1:0\nweb_config: web.yml\n", 1)
	dir := writeFiles(t, map[string]string{"canary.yaml": body, "slo.yaml": sloFile,
		"web.yml": "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"})
	certPEM := selfSigned(t, dir)
	d, err := New(filepath.Join(dir, "canary.yaml"), Options{Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + d.Addr() + "/healthz")
	if err != nil {
		t.Fatalf("https: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Errorf("https /healthz: %d", resp.StatusCode)
	}
	cancel()
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}

	// The key or the certificate cannot be read after the file was checked
	// (gone, or a directory where the file should be, which fails as root
	// too): Start fails at once naming the file, and probes nothing.
	for _, name := range []string{"tls.key", "tls.crt"} {
		t.Run(name, func(t *testing.T) {
			selfSigned(t, dir)
			d2, err := New(filepath.Join(dir, "canary.yaml"), Options{Log: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, name)
			os.Remove(p)
			os.Mkdir(p, 0o755)
			defer os.Remove(p)
			ctx2, cancel2 := context.WithCancel(context.Background())
			defer cancel2()
			err = d2.Start(ctx2)
			if err == nil {
				cancel2()
				d2.Wait()
				t.Fatalf("Start with an unreadable %s: nil, want an error", name)
			}
			if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "web_config") {
				t.Errorf("Start: %v, want an error naming %s", err, p)
			}
			if d2.ready.Load() || len(d2.runs) != 0 {
				t.Errorf("a daemon that failed to start is ready or probing")
			}
			// The port is free again: nothing was left listening.
		})
	}
}

// A target whose answers carry no token: every probe is empty_answer, a
// bad event for the error rate and for every latency objective, so the
// budgets burn although every answer was a 200.
func TestCanaryEmptyAnswersBurn(t *testing.T) {
	cfg := fastSim()
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultEmpty, Rate: 1}}
	srv := simtest.Start(t, cfg)
	d, _, logs := startCanary(t, fmt.Sprintf(canaryFile, srv.URL, "2s", 20, ""))
	waitFor(t, logs, 5*time.Second, "bad events of empty answers", func() bool {
		s := status(t, d)
		return window(objective(t, s, "sim", "errors"), "5m").Bad >= 3 && window(objective(t, s, "sim", "ttft"), "5m").Bad >= 3
	})
	s := status(t, d)
	errs, ttft := objective(t, s, "sim", "errors"), objective(t, s, "sim", "ttft")
	if w := window(errs, "5m"); w.Good != 0 || w.BurnRate <= 1 {
		t.Errorf("errors 5m window of empty answers: %+v, want all bad, burning", w)
	}
	if w := window(ttft, "5m"); w.Good != 0 {
		t.Errorf("ttft 5m window of empty answers: %+v, want no good event", w)
	}
	if errs.BudgetRemaining >= 1 {
		t.Errorf("errors budget %v after empty answers, want burnt", errs.BudgetRemaining)
	}
	fams, _ := scrape(t, d)
	if v := total(fams, prom.RequestErrorsTotal, map[string]string{"target": "sim", "kind": "empty_answer"}); v == 0 {
		t.Errorf("no empty_answer counted")
	}
}

// histograms: native serves the latency histograms in native form only,
// which /metrics hands out in the protobuf format a scraper with native
// histograms on asks for: no classic buckets, a schema, and the probes'
// count. The text format still parses (the count, sum and +Inf bucket).
func TestCanaryNativeHistograms(t *testing.T) {
	srv := simtest.Start(t, fastSim())
	body := strings.Replace(fmt.Sprintf(canaryFile, srv.URL, "2s", 20, ""), "evaluation_interval: 200ms\n",
		"evaluation_interval: 200ms\nhistograms: native\n", 1)
	d, _, logs := startCanary(t, body)
	simT := map[string]string{"target": "sim"}
	waitFor(t, logs, 5*time.Second, "5 probes of sim", func() bool {
		fams, _ := scrape(t, d)
		return total(fams, prom.TTFTSeconds, simT) >= 5
	})
	req, _ := http.NewRequest(http.MethodGet, "http://"+d.Addr()+"/metrics", nil)
	req.Header.Set("Accept", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("/metrics answered %q to a protobuf Accept", resp.Header.Get("Content-Type"))
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	found := false
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		if mf.GetName() != prom.TTFTSeconds {
			continue
		}
		found = true
		h := mf.GetMetric()[0].GetHistogram()
		if len(h.Bucket) != 0 || h.Schema == nil || h.GetSampleCount() < 5 || len(h.PositiveSpan) == 0 {
			t.Errorf("TTFT: %d classic buckets, schema %v, count %d, %d spans; want native only",
				len(h.Bucket), h.Schema, h.GetSampleCount(), len(h.PositiveSpan))
		}
	}
	if !found {
		t.Errorf("no %s in the protobuf exposition", prom.TTFTSeconds)
	}
}
