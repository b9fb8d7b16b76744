package prompts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// streamDigest is the SHA-256 of the JSON of the first n prompts of the
// mix's stream for seed, every session followed to its end with canned
// answers. It also returns the bytes of the first prompts for diffing.
func streamDigest(t testing.TB, path string, seed int64, n int) (string, []byte) {
	t.Helper()
	m, err := LoadMix(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var head []byte
	src := m.Source(seed)
	write := func(h hash.Hash, p *Prompt) {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
		h.Write([]byte{'\n'})
		if len(head) < 1<<16 {
			head = append(head, b...)
		}
	}
	for i := 0; i < n; i++ {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, turn := range followSession(p) {
			write(h, turn)
		}
		if p.Graph != nil {
			// A session's content is its calls and their edges.
			for _, c := range p.Graph.Calls {
				write(h, c.Prompt)
				b, _ := json.Marshal(c.After)
				h.Write(b)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), head
}

// goldenDigests were computed once, from the sample mixes at their own
// seeds, 300 prompts each. They pin the byte-for-byte stream: a change in
// any of them means every user's "same seed, same requests" broke, which
// needs a release note, not a new golden value.
var goldenDigests = map[string]string{
	"agent.yaml":          "ec9667edf35b896c5b72eaa47a446530e795421b5a354a5ea4becb7f910d50a5",
	"trace-dynamo.yaml":   "a2b69c2e5d916c74bf72cec3829cd9a14803d0c9845b92d2c9543a95b5fa53b8",
	"trace-otel.yaml":     "a22c14ac163ca8dee22fd3d6e43fda3fd5684fef922d139cb0a361487cb291f8",
	"trace-weka.yaml":     "560c112e3f9b7302ab7ef81d1ea91122c3beaa31746ddb28d7879dd70bae4228",
	"chat.yaml":           "5cffcdf950576c42ec201a620cc4f7b322d60414f98cc8f509d578f8dcc19f58",
	"longgen.yaml":        "0001e926d7524acdb42e88229dfa39f5ab78d62284b2a061cd539dd8fa0a0449",
	"production.yaml":     "26fe230d118c186ae120a36afc58b3932372b54e5dc938584c789beada8b8d84",
	"rag.yaml":            "893280a78d4e14b1a740a71ff74a8d8a3ed71143d25fb0e8b5d4058bbc6d1db7",
	"sessions.yaml":       "74648ba8d9ee12e4f5406510e6cf2f675a76514a033e2befbd1b339034922ba0",
	"trace-azure.yaml":    "e96e63ad21823aa3f199f98393e8adb00a2b1f9a789a45e44ed87f6616bb722a",
	"trace-burstgpt.yaml": "8f4c01fa0ed59b7d94bd68660ff7a409a42ad5ac3f1f11d2091fc10ebead7368",
	"trace-mooncake.yaml": "6f33651158ab50b52dd50142563070e775b5096b229c3933c2d9241dc3e827b1",
}

// The same mix file and seed give the same sequence of requests, byte for
// byte: against golden digests, and across two independent loads.
func TestDeterminismGolden(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../testdata/mixes/*.yaml")
	for _, f := range files {
		name := filepath.Base(f)
		m, err := LoadMix(f, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := streamDigest(t, f, m.Seed(), 300)
		want, ok := goldenDigests[name]
		if !ok {
			t.Errorf("%s: no golden digest; add %q: %q", name, name, got)
			continue
		}
		if got != want {
			t.Errorf("%s: stream digest %s, golden %s", name, got, want)
		}
	}
}

func TestDeterminismTwoRuns(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"production.yaml", "sessions.yaml", "trace-mooncake.yaml"} {
		path := "../testdata/mixes/" + f
		a, ha := streamDigest(t, path, 12345, 500)
		b, hb := streamDigest(t, path, 12345, 500)
		if a != b || string(ha) != string(hb) {
			t.Errorf("%s: two runs differ", f)
		}
		c, _ := streamDigest(t, path, 54321, 500)
		if c == a {
			t.Errorf("%s: a different seed gave the same stream", f)
		}
	}
	// The JSON is what a user would diff: it must hold the text.
	_, head := streamDigest(t, "../testdata/mixes/chat.yaml", 1, 2)
	if !strings.Contains(string(head), `"messages"`) {
		t.Errorf("digest input lacks messages: %s", head)
	}
}
