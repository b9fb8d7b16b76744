package evidence

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/results"
)

func pack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"requests.jsonl":        "{\"seq\":0}\n{\"seq\":1}\n",
		"verdict.json":          "{}\n",
		"junit.xml":             "<testsuites/>\n",
		"inputs/plan-plan.yaml": "kind: Plan\n",
		"hist/normal.hlog":      "#[StartTime: 0]\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func keys(t *testing.T) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ParsePrivateKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("key pair does not match")
	}
	return priv, pub
}

func TestManifest(t *testing.T) {
	dir := pack(t)
	m, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	want := []string{"hist/normal.hlog", "inputs/plan-plan.yaml", "junit.xml", "requests.jsonl", "verdict.json"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("paths %v", paths)
	}
	// sha256 of "{\"seq\":0}\n{\"seq\":1}\n"
	if f := m.Files[3]; f.Size != 20 || f.SHA256 != sha256hex("{\"seq\":0}\n{\"seq\":1}\n") {
		t.Fatalf("entry %+v", f)
	}
	if err := Check(dir, m); err != nil {
		t.Fatal(err)
	}
	// Writing a signature or rewriting the manifest does not change it.
	os.WriteFile(filepath.Join(dir, results.SignatureFile), []byte("{}"), 0o644)
	m2, _ := Build(dir)
	if !reflect.DeepEqual(m, m2) {
		t.Fatal("manifest lists itself or its signature")
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err == nil {
		if _, err := Build(dir); err == nil || !strings.Contains(err.Error(), "link: not a regular file") {
			t.Fatalf("symlink: %v", err)
		}
	}
}

func TestSignVerify(t *testing.T) {
	priv, pub := keys(t)
	otherPriv, otherPub := keys(t)
	_ = otherPriv

	fresh := func() string {
		dir := pack(t)
		if _, err := Sign(dir, priv, SignOptions{}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := fresh()
	if _, err := os.Stat(filepath.Join(dir, results.ManifestFile)); err != nil {
		t.Fatal("Sign did not write the manifest")
	}
	m, err := Verify(dir, pub)
	if err != nil || len(m.Files) != 6 { // the pack's 5 and manifest.json
		t.Fatalf("verify: %v", err)
	}
	var env Envelope
	b, _ := os.ReadFile(filepath.Join(dir, results.SignatureFile))
	json.Unmarshal(b, &env)
	if env.PayloadType != AttestationPayloadType || len(env.Signatures) != 1 || env.Signatures[0].KeyID != KeyID(pub) {
		t.Fatalf("envelope %+v", env)
	}

	// Wrong key.
	if _, err := Verify(dir, otherPub); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), KeyID(otherPub)) {
		t.Fatalf("wrong key: %v", err)
	}

	flip := func(dir, name string, at int) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[at] ^= 0x01
		os.WriteFile(p, b, 0o644)
	}
	wantFile := func(err error, path, reason string) {
		t.Helper()
		var fe *FileError
		if !errors.As(err, &fe) || fe.Path != path || !strings.Contains(fe.Reason, reason) {
			t.Fatalf("want %s %s, got %v", path, reason, err)
		}
	}
	// One byte changed in a file: that file is named.
	dir = fresh()
	flip(dir, "requests.jsonl", 3)
	_, err = Verify(dir, pub)
	wantFile(err, "requests.jsonl", "modified")
	// In a nested file.
	dir = fresh()
	flip(dir, "inputs/plan-plan.yaml", 0)
	_, err = Verify(dir, pub)
	wantFile(err, "inputs/plan-plan.yaml", "modified")
	// Missing file.
	dir = fresh()
	os.Remove(filepath.Join(dir, "junit.xml"))
	_, err = Verify(dir, pub)
	wantFile(err, "junit.xml", "missing")
	// Added file.
	dir = fresh()
	os.WriteFile(filepath.Join(dir, "extra.txt"), []byte("x"), 0o644)
	_, err = Verify(dir, pub)
	wantFile(err, "extra.txt", "added after it was signed")
	// The manifest edited (one byte) without re-signing.
	dir = fresh()
	flip(dir, results.ManifestFile, 10)
	_, err = Verify(dir, pub)
	wantFile(err, results.ManifestFile, "not the manifest that was signed")
	// The manifest re-made to cover a changed file, without the key: the
	// signature no longer matches it.
	dir = fresh()
	flip(dir, "verdict.json", 0)
	Write(dir)
	_, err = Verify(dir, pub)
	wantFile(err, results.ManifestFile, "not the manifest that was signed")
	// The signature itself changed by one byte.
	dir = fresh()
	var e2 Envelope
	b, _ = os.ReadFile(filepath.Join(dir, results.SignatureFile))
	json.Unmarshal(b, &e2)
	sig := []byte(e2.Signatures[0].Sig)
	sig[5] ^= 0x01
	e2.Signatures[0].Sig = string(sig)
	b, _ = json.Marshal(e2)
	os.WriteFile(filepath.Join(dir, results.SignatureFile), b, 0o644)
	if _, err := Verify(dir, pub); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("altered signature: %v", err)
	}
	// No signature.
	dir = pack(t)
	if _, err := Verify(dir, pub); err == nil || !strings.Contains(err.Error(), "no signature") {
		t.Fatalf("unsigned: %v", err)
	}
	// Sign refuses a pack changed after its manifest was made.
	dir = pack(t)
	Write(dir)
	flip(dir, "verdict.json", 0)
	if _, err := Sign(dir, priv, SignOptions{}); err == nil || !strings.Contains(err.Error(), "verdict.json: modified") {
		t.Fatalf("sign over tampered: %v", err)
	}
}

func TestPAE(t *testing.T) {
	// The test vector of the DSSE protocol document.
	got := string(PAE("http://example.com/HelloWorld", []byte("hello world")))
	if got != "DSSEv1 29 http://example.com/HelloWorld 11 hello world" {
		t.Fatalf("PAE = %q", got)
	}
}

// TestKeyIDMatchesSSH checks KeyID against ssh-keygen's own fingerprint
// of an Ed25519 key it made, where ssh-keygen is installed.
func TestKeyIDMatchesSSH(t *testing.T) {
	kg, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen not installed")
	}
	key := filepath.Join(t.TempDir(), "k")
	if out, err := exec.Command(kg, "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	line, _ := os.ReadFile(key + ".pub")
	f := strings.Fields(string(line))
	blob, err := base64.StdEncoding.DecodeString(f[1])
	if err != nil || len(blob) < 32 {
		t.Fatalf("public key line %q", line)
	}
	pub := ed25519.PublicKey(blob[len(blob)-32:])
	out, err := exec.Command(kg, "-l", "-E", "sha256", "-f", key+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	if fp := strings.Fields(string(out)); len(fp) < 2 || fp[1] != KeyID(pub) {
		t.Fatalf("ssh-keygen %q, KeyID %q", out, KeyID(pub))
	}
}

func TestParseKeyErrors(t *testing.T) {
	priv, _, _ := GenerateKey()
	if _, err := ParsePublicKey(priv); err == nil {
		t.Fatal("a private key parsed as public")
	}
	if _, err := ParsePrivateKey([]byte("junk")); err == nil {
		t.Fatal("junk parsed")
	}
}

func TestFingerprint(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"proc/sys/kernel/osrelease":  "6.1.0-test\n",
		"etc/os-release":             "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n",
		"proc/cpuinfo":               "processor\t: 0\nmodel name\t: Test CPU @ 3GHz\n\nprocessor\t: 1\nmodel name\t: Test CPU @ 3GHz\n",
		"proc/meminfo":               "MemTotal:       16384 kB\nMemFree: 1 kB\n",
		"proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version: gcc 12\n",
		"proc/driver/nvidia/gpus/0000:18:00.0/information": "Model: \t\t NVIDIA H200\nIRQ:   \t\t 17\nGPU UUID: \t GPU-1234\nBus Location: \t 0000:18:00.0\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	e := fingerprintAt(root, "tailgate", "v1.2.3", []string{"tailgate", "validate", "--api-key", "s"})
	h := e.Host
	if h.Kernel != "6.1.0-test" || h.Distro != "Debian GNU/Linux 12 (bookworm)" || h.CPUModel != "Test CPU @ 3GHz" ||
		h.CPUThreads != 2 || h.MemoryBytes != 16384*1024 || h.Name == "" || h.CPUs < 1 {
		t.Fatalf("host %+v", h)
	}
	if e.Tool.Version != "v1.2.3" || !strings.HasPrefix(e.Tool.Go, "go") || e.Command[3] != "[REDACTED]" {
		t.Fatalf("tool %+v %v", e.Tool, e.Command)
	}
	if len(e.GPUs) != 1 || e.GPUs[0].Model != "NVIDIA H200" || e.GPUs[0].UUID != "GPU-1234" || e.GPUs[0].Driver != "550.54.15" || e.GPUs[0].BusID != "0000:18:00.0" {
		t.Fatalf("gpus %+v", e.GPUs)
	}
}

// The server block keeps its environment.json keys.
func TestServerJSON(t *testing.T) {
	e := Environment{Schema: EnvironmentSchema, Server: &Server{URL: "http://h/v1/chat/completions", Models: []string{"m"},
		Headers: map[string]string{"server": "sim/0.1"}, Error: "GET http://h/v1/models: HTTP 500"}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Server map[string]any `json:"server"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"url": "http://h/v1/chat/completions", "models": []any{"m"},
		"headers": map[string]any{"server": "sim/0.1"}, "error": "GET http://h/v1/models: HTTP 500"}
	if !reflect.DeepEqual(got.Server, want) {
		t.Fatalf("server block %v, want %v", got.Server, want)
	}
}

func TestCopyInput(t *testing.T) {
	src := filepath.Join(t.TempDir(), "plan.yaml")
	os.WriteFile(src, []byte("kind: Plan\n"), 0o644)
	dir := t.TempDir()
	in, err := CopyInput(dir, "plan", src)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, in.Copy))
	if string(b) != "kind: Plan\n" || in.Copy != "inputs/plan-plan.yaml" || in.Size != 11 || len(in.SHA256) != 64 {
		t.Fatalf("%+v", in)
	}
}
