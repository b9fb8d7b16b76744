package canary

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/field"
)

// A target the client refuses to build is logged, and shown in /status,
// with the setting named as the canary file's key (and its line where the
// file sets it), never as a command-line flag the canary has not got; the
// URL's credential stays out of both.
func TestConfigErrorNamesTheYAMLKey(t *testing.T) {
	const secret = "pw-SECRET-9"
	body := `
kind: Canary
apiVersion: tailgate/v1
listen: 127.0.0.1:0
evaluation_interval: 200ms
slo: slo.yaml
targets:
  - name: bare
    url: http://probe:` + secret + `@127.0.0.1:1
    api: kserve-grpc
    model: m
    schedule: {interval: 1s}
  - name: headed
    url: http://probe:` + secret + `@127.0.0.1:1
    api: kserve-grpc
    model: m
    headers: {X-Team: probes}
    schedule: {interval: 1s}
`
	d, path, logs := startCanary(t, body)
	waitFor(t, logs, 5*time.Second, "both targets refused", func() bool {
		return strings.Count(logs.String(), "not probing it until a reload fixes it") >= 2
	})
	out := logs.String()
	for _, want := range []string{
		"canary: target bare: kserve: target", "user info is not sent over gRPC (use targets[0].headers or the API key)",
		"(use targets[1].headers at " + path + ":16 or the API key)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--header") || strings.Contains(out, secret) {
		t.Errorf("log names a flag or the credential:\n%s", out)
	}
	for _, ts := range status(t, d).Targets {
		if !strings.Contains(ts.LastErrorText, "headers") || strings.Contains(ts.LastErrorText, "--") ||
			strings.Contains(ts.LastErrorText, secret) {
			t.Errorf("target %s: /status last error %q", ts.Name, ts.LastErrorText)
		}
	}
}

func TestSettingName(t *testing.T) {
	dir := writeFiles(t, map[string]string{"slo.yaml": sloFile})
	file := filepath.Join(dir, "canary.yaml")
	cfg, err := ParseConfig(file, []byte(`kind: Canary
apiVersion: tailgate/v1
slo: slo.yaml
defaults:
  model: m
targets:
  - name: a
    url: http://127.0.0.1:1
    schedule: {rate: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	tg := &cfg.Targets[0]
	err = field.Errorf("Model", "not given and the server lists none")
	if got, want := tg.errText(err), "defaults.model at "+file+":5 not given and the server lists none"; got != want {
		t.Errorf("errText = %q, want %q", got, want)
	}
	if got, want := tg.errText(field.Errorf("API", `"x": want one of a, b`)), `targets[0].api "x": want one of a, b`; got != want {
		t.Errorf("errText(API, unset) = %q, want %q", got, want)
	}
	if got, want := tg.errText(field.Errorf("Shard", "bad")), "shard bad"; got != want {
		t.Errorf("errText(no key) = %q, want %q", got, want)
	}
}
