package evidence_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	attestation "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// independentVerify checks a signed pack as a reviewer without tailgate
// would: the DSSE envelope with go-securesystemslib and the public key
// PEM, the statement with the in-toto attestation library, then every
// file of the directory against the statement's subjects. It uses nothing
// of tailgate's.
func independentVerify(dir string, pubPEM []byte) (*attestation.Statement, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.dsse.json"))
	if err != nil {
		return nil, err
	}
	var env dsse.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	key, err := signerverifier.LoadKey(pubPEM)
	if err != nil {
		return nil, err
	}
	sv, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(key)
	if err != nil {
		return nil, err
	}
	ev, err := dsse.NewEnvelopeVerifier(anyKeyID{sv})
	if err != nil {
		return nil, err
	}
	if _, err := ev.Verify(context.Background(), &env); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if env.PayloadType != "application/vnd.in-toto+json" {
		return nil, fmt.Errorf("payload type %q", env.PayloadType)
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return nil, err
	}
	var st attestation.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	want := map[string]string{}
	for _, s := range st.GetSubject() {
		want[s.GetName()] = s.GetDigest()["sha256"]
	}
	seen := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "manifest.dsse.json" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		digest, ok := want[rel]
		switch {
		case !ok:
			return fmt.Errorf("%s is not a subject", rel)
		case digest != hex.EncodeToString(sum[:]):
			return fmt.Errorf("%s: digest differs from the subject's", rel)
		}
		seen++
		return nil
	})
	if err == nil && seen != len(want) {
		err = fmt.Errorf("%d subjects, %d files", len(want), seen)
	}
	return &st, err
}

// anyKeyID offers no key id, so the library matches the signature by the
// key alone (a DSSE key id is an unauthenticated hint).
type anyKeyID struct{ dsse.Verifier }

func (anyKeyID) KeyID() (string, error) { return "", nil }

// judgedPack writes an acceptance pack with a measured pass, a waived
// failure and a queue-delay verdict interpolated within a server bucket.
func judgedPack(t *testing.T) string {
	t.Helper()
	dir := results.Dir(t.TempDir())
	exp := time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC)
	rep := &slo.Report{Schema: slo.ReportSchema, Plan: "acceptance", SLO: "chat", Status: slo.ReportPass,
		EvaluatedAt: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC),
		Verdicts: []slo.Verdict{
			{Objective: "ttft-p99", Stage: "normal", Kind: slo.KindLatency, Metric: slo.TTFT, ThresholdText: "500ms", TargetText: "99%",
				Measured: 0.995, Good: 995, Total: 1000, Result: slo.Pass, Status: slo.Pass, QuantileFrom: slo.QuantileFromHDR},
			{Objective: "tpot-p90", Stage: "peak", Kind: slo.KindLatency, Metric: slo.TPOT, ThresholdText: "20ms", TargetText: "90%",
				Measured: 0.8, Good: 80, Total: 100, Result: slo.Fail, Status: slo.Waived,
				Waiver: &slo.Waiver{Objective: "tpot-p90", Stage: "peak", Owner: "bob", Reason: "INF-7 kernel fix pending", Expires: exp}},
			{Objective: "queue-p95", Stage: "normal", Kind: slo.KindLatency, Metric: slo.QueueDelay, ThresholdText: "200ms", TargetText: "95%",
				Measured: 0.96, Good: 960, Total: 1000, Result: slo.Pass, Status: slo.Pass, QuantileFrom: slo.QuantileFromBuckets,
				Source: "vllm:request_queue_time_seconds", Note: "estimated from histogram buckets: 950 interpolated linearly within the bucket"},
		}}
	if err := results.WriteJSON(dir.Path(results.VerdictFile), rep); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{results.RecordsFile: "{\"seq\":0}\n", "inputs/plan-acceptance.yaml": "kind: Plan\n",
		results.EnvironmentFile: `{"schema":"tailgate.environment/v1","tool":{"name":"tailgate","version":"v1","go":"go1.26"},"host":{"name":"h","os":"linux","arch":"amd64","cpus":2},"inputs":{"plan":{"source":"plan.yaml","copy":"inputs/plan-acceptance.yaml","sha256":"ab","size":11}}}`} {
		p := dir.Path(name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return string(dir)
}

// A signed pack verifies with a verifier that is not tailgate's code, and
// the predicate says what a reviewer signed for; one changed byte in any
// file fails that verifier, as it fails tailgate verify.
func TestAttestationVerifiesWithoutTailgate(t *testing.T) {
	privPEM, pubPEM, err := evidence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := evidence.ParsePrivateKey(privPEM)
	pub, _ := evidence.ParsePublicKey(pubPEM)
	dir := judgedPack(t)
	if _, err := evidence.Sign(dir, priv, evidence.SignOptions{Reviewer: "alice", Version: "v9.9.9"}); err != nil {
		t.Fatal(err)
	}
	st, err := independentVerify(dir, pubPEM)
	if err != nil {
		t.Fatalf("independent verifier: %v", err)
	}
	if st.GetPredicateType() != evidence.PredicateType || len(st.GetSubject()) != 5 {
		t.Errorf("predicate %q, %d subjects", st.GetPredicateType(), len(st.GetSubject()))
	}
	pred, _ := protojson.Marshal(st.GetPredicate())
	var p evidence.Predicate
	if err := json.Unmarshal(pred, &p); err != nil {
		t.Fatal(err)
	}
	if p.Reviewer != "alice" || p.Tool.Version != "v9.9.9" || p.Result == nil || p.Result.Status != "PASS" || p.Plan != "acceptance" ||
		p.Inputs["plan"].Copy != "inputs/plan-acceptance.yaml" || !strings.Contains(string(p.Environment), `"cpus":2`) {
		t.Errorf("predicate %s", pred)
	}
	basis := map[string]string{}
	for _, v := range p.Verdicts {
		basis[v.Objective] = v.Basis + " " + v.Status
	}
	if basis["ttft-p99"] != "measured PASS" || basis["tpot-p90"] != "measured WAIVED" || basis["queue-p95"] != "estimated PASS" {
		t.Errorf("verdicts' basis %v", basis)
	}
	if len(p.Estimates) != 1 || !strings.Contains(p.Estimates[0], "queue-p95 on stage normal") {
		t.Errorf("estimates %q", p.Estimates)
	}
	if len(p.Waivers) != 1 || p.Waivers[0].Owner != "bob" || p.Waivers[0].Expired {
		t.Errorf("waivers %+v", p.Waivers)
	}
	if m, err := evidence.Verify(dir, pub); err != nil || len(m.Files) != 5 {
		t.Fatalf("tailgate verify: %v", err)
	}
	// One byte changed: both verifiers name the file.
	b, _ := os.ReadFile(filepath.Join(dir, results.RecordsFile))
	b[2] ^= 1
	os.WriteFile(filepath.Join(dir, results.RecordsFile), b, 0o644)
	if _, err := independentVerify(dir, pubPEM); err == nil || !strings.Contains(err.Error(), "requests.jsonl: digest differs") {
		t.Errorf("independent verifier after a changed byte: %v", err)
	}
	if _, err := evidence.Verify(dir, pub); err == nil || !strings.Contains(err.Error(), "requests.jsonl: modified") {
		t.Errorf("tailgate verify after a changed byte: %v", err)
	}
}
