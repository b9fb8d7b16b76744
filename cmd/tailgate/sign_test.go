package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

func TestSignVerifyCommands(t *testing.T) {
	keys := t.TempDir()
	key, pub := filepath.Join(keys, "k.pem"), filepath.Join(keys, "k.pub")
	if code, out, errOut := tgCmd("sign", "--keygen", "--key", key); code != slo.ExitOK || !strings.Contains(out, "key id SHA256:") {
		t.Fatalf("keygen: %d %s %s", code, out, errOut)
	}
	if st, _ := os.Stat(key); st.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v", st.Mode())
	}
	if code, _, _ := tgCmd("sign", "--keygen", "--key", key); code != slo.ExitUsage {
		t.Fatal("keygen overwrote a key")
	}
	other := filepath.Join(keys, "o.pem")
	tgCmd("sign", "--keygen", "--key", other)

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, results.RecordsFile), []byte("{\"seq\":0}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, results.VerdictFile), []byte("{}\n"), 0o644)
	if code, out, errOut := tgCmd("sign", "--key", key, dir); code != slo.ExitOK || !strings.Contains(out, "signed") {
		t.Fatalf("sign: %d %s %s", code, out, errOut)
	}
	if code, out, _ := tgCmd("verify", "--pub", pub, dir); code != slo.ExitOK || !strings.Contains(out, "3 files match") {
		t.Fatalf("verify: %d %s", code, out)
	}
	if code, _, errOut := tgCmd("verify", "--pub", filepath.Join(keys, "o.pub"), dir); code != slo.ExitFailed ||
		!strings.Contains(errOut, "signature does not verify") {
		t.Fatalf("wrong key: %d %s", code, errOut)
	}
	b, _ := os.ReadFile(filepath.Join(dir, results.RecordsFile))
	b[2] = 'X'
	os.WriteFile(filepath.Join(dir, results.RecordsFile), b, 0o644)
	if code, _, errOut := tgCmd("verify", "--pub", pub, dir); code != slo.ExitFailed || !strings.Contains(errOut, "requests.jsonl: modified") {
		t.Fatalf("tampered: %d %s", code, errOut)
	}
	if code, _, _ := tgCmd("verify", "--pub", key, dir); code != slo.ExitUsage {
		t.Fatal("a private key accepted as public")
	}
	for _, c := range []string{"sign", "verify"} {
		if code, out, _ := tgCmd(c, "--help"); code != slo.ExitOK || !strings.Contains(out, "Usage: tailgate "+c) {
			t.Fatalf("%s --help: %d", c, code)
		}
	}
}
