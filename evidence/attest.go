package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	tgversion "github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// An evidence pack is signed as an in-toto attestation: a DSSE envelope
// whose payload is an in-toto Statement v1 naming every file of the pack
// (with its SHA-256) as a subject, and a predicate of ours that says what
// was judged. Standard attestation tooling (the in-toto attestation
// library, cosign verify-blob-attestation with the public key) checks it
// without tailgate.
const (
	// AttestationPayloadType is the DSSE payload type of an in-toto
	// statement.
	AttestationPayloadType = "application/vnd.in-toto+json"
	// StatementType is the in-toto Statement v1 type.
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateType names the predicate: an acceptance verdict over the
	// pack's files.
	PredicateType = "https://github.com/tailgate-llm/tailgate/attestation/acceptance/v1"
)

// Statement is an in-toto Statement v1 (in-toto/attestation,
// spec/v1/statement.md) with tailgate's predicate.
type Statement struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     Predicate `json:"predicate"`
}

// Subject is one file of the pack: its path relative to the pack and its
// digest (in-toto ResourceDescriptor, name and digest).
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Predicate is what a reviewer signs for: what was judged and how it came
// out, against which inputs, where, and who signed. Measured figures and
// estimates are kept apart: each verdict says its basis.
type Predicate struct {
	Tool     tgversion.Tool `json:"tool"` // the tailgate that signed
	Reviewer string         `json:"reviewer,omitempty"`
	SignedAt time.Time      `json:"signed_at"`
	// Inputs are the plan, SLO and mix copied into the pack, with hashes.
	Inputs map[string]Input `json:"inputs,omitempty"`
	// Plan and SLO name what the verdict judged (empty for a plain run).
	Plan string `json:"plan,omitempty"`
	SLO  string `json:"slo,omitempty"`
	// Result is the verdict as a whole, absent for a run not judged
	// against an SLO.
	Result *PredicateResult `json:"result,omitempty"`
	// Verdicts are one per objective and stage, waived ones included.
	Verdicts []PredicateVerdict `json:"verdicts,omitempty"`
	// Waivers are those that matched a verdict, expired ones included.
	Waivers []PredicateWaiver `json:"waivers,omitempty"`
	// Validity says whether the run's figures can be trusted and why not.
	Validity *PredicateValidity `json:"validity,omitempty"`
	// Environment is environment.json as written (host, GPUs, server,
	// tool, redacted command line), when the pack has one.
	Environment json.RawMessage `json:"environment,omitempty"`
	// Estimates lists every figure that is an estimate rather than a
	// measurement, one line each; empty when every figure was measured.
	Estimates []string `json:"estimates,omitempty"`
}

// PredicateResult is the verdict as a whole.
type PredicateResult struct {
	Status      string    `json:"status"`
	ExitCode    int       `json:"exit_code"`
	EvaluatedAt time.Time `json:"evaluated_at"`
}

// Bases of a verdict's figure.
const (
	BasisMeasured  = "measured"  // exact counts over the records
	BasisBuckets   = "buckets"   // a server histogram, judged at bucket bounds
	BasisEstimated = "estimated" // interpolated within a server histogram bucket
	BasisManual    = "manual"    // recorded by a person
)

// PredicateVerdict is one objective on one stage.
type PredicateVerdict struct {
	Objective string  `json:"objective"`
	Stage     string  `json:"stage"`
	Class     string  `json:"class,omitempty"`
	Metric    string  `json:"metric"`
	Threshold string  `json:"threshold"`
	Target    string  `json:"target,omitempty"`
	Measured  float64 `json:"measured"`
	Good      uint64  `json:"good"`
	Total     uint64  `json:"total"`
	Result    string  `json:"result"`
	Status    string  `json:"status"`
	Basis     string  `json:"basis"`
	Note      string  `json:"note,omitempty"`
}

// PredicateWaiver is a waiver that matched a verdict.
type PredicateWaiver struct {
	Objective string    `json:"objective"`
	Stage     string    `json:"stage,omitempty"`
	Owner     string    `json:"owner"`
	Reason    string    `json:"reason"`
	Expires   time.Time `json:"expires"`
	Expired   bool      `json:"expired"`
}

// PredicateValidity is the run's validity: the problems that make it
// invalid, none when it is valid.
type PredicateValidity struct {
	Valid   bool     `json:"valid"`
	Reasons []string `json:"reasons,omitempty"`
}

// SignOptions say who signs and with which tool.
type SignOptions struct {
	Reviewer string
	Version  string
	// Now is the signing time (zero: now).
	Now time.Time
}

// statement builds the statement of dir, whose manifest is m.
func statement(dir string, m *Manifest, manifestRaw []byte, opt SignOptions) (*Statement, error) {
	st := &Statement{Type: StatementType, PredicateType: PredicateType}
	for _, f := range m.Files {
		st.Subject = append(st.Subject, Subject{Name: f.Path, Digest: map[string]string{"sha256": f.SHA256}})
	}
	// The manifest is a file of the pack too: a verifier that reads it
	// knows it is the one signed.
	st.Subject = append(st.Subject, Subject{Name: results.ManifestFile, Digest: map[string]string{"sha256": sha256Hex(manifestRaw)}})
	slices.SortFunc(st.Subject, func(a, b Subject) int { return strings.Compare(a.Name, b.Name) })
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	p := &st.Predicate
	// Go is the signer's toolchain: the "go" key the attestation has
	// always had, now filled.
	p.Tool, p.Reviewer, p.SignedAt = tgversion.Tool{Name: "tailgate", Version: opt.Version, Revision: tgversion.Revision(), Go: runtime.Version()}, opt.Reviewer, now.UTC()
	d := results.Dir(dir)
	if b, err := os.ReadFile(d.Path(results.EnvironmentFile)); err == nil {
		var env Environment
		if err := json.Unmarshal(b, &env); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Path(results.EnvironmentFile), err)
		}
		p.Environment, p.Inputs = json.RawMessage(compactJSON(b)), env.Inputs
	}
	rep, err := d.ReadReport()
	if errors.Is(err, os.ErrNotExist) {
		err = nil
		// A plain run: its summary holds the verdict of run --slo, if any.
		if s, serr := d.ReadSummary(); serr == nil {
			rep = s.SLO
			p.Validity = &PredicateValidity{Valid: s.Validity.Valid, Reasons: s.Validity.Reasons}
		}
	}
	if err != nil {
		return nil, err
	}
	if rep != nil {
		p.describe(rep)
	}
	return st, nil
}

// describe fills the predicate from a judged report.
func (p *Predicate) describe(rep *slo.Report) {
	p.Plan, p.SLO = rep.Plan, rep.SLO
	p.Result = &PredicateResult{Status: rep.Status, ExitCode: rep.ExitCode, EvaluatedAt: rep.EvaluatedAt}
	if p.Validity == nil {
		p.Validity = &PredicateValidity{Valid: rep.Status != slo.ReportInvalid}
		for _, pr := range rep.Problems {
			p.Validity.Reasons = append(p.Validity.Reasons, pr.String())
		}
	}
	seen := map[string]bool{}
	for _, v := range rep.Verdicts {
		pv := PredicateVerdict{Objective: v.Objective, Stage: v.Stage, Class: v.Class, Metric: string(v.Metric),
			Threshold: v.ThresholdText, Target: v.TargetText, Measured: v.Measured, Good: v.Good, Total: v.Total,
			Result: string(v.Result), Status: string(v.Status), Basis: basis(&v), Note: v.Note}
		if pv.Basis == BasisEstimated {
			p.Estimates = append(p.Estimates, fmt.Sprintf("%s on stage %s: %s", v.Objective, v.Stage, v.Note))
		}
		p.Verdicts = append(p.Verdicts, pv)
		if w := v.Waiver; w != nil {
			key := w.Objective + "\x00" + w.Stage + "\x00" + w.Owner + "\x00" + w.Reason
			if !seen[key] {
				seen[key] = true
				p.Waivers = append(p.Waivers, PredicateWaiver{Objective: w.Objective, Stage: w.Stage, Owner: w.Owner,
					Reason: w.Reason, Expires: w.Expires, Expired: v.WaiverExpired})
			}
		}
	}
}

// basis says where a verdict's figure came from.
func basis(v *slo.Verdict) string {
	switch {
	case v.Kind == slo.KindManual:
		return BasisManual
	case v.QuantileFrom == slo.QuantileFromBuckets && strings.Contains(v.Note, "interpolated"):
		return BasisEstimated
	case v.QuantileFrom == slo.QuantileFromBuckets || v.Metric == slo.QueueDelay && v.Source != "":
		return BasisBuckets
	}
	return BasisMeasured
}

// checkStatement checks a signed statement against dir: its type, and
// that its subjects are exactly the pack's files, each with its digest.
// The manifest it returns lists the subjects.
func checkStatement(dir string, payload []byte) (*Manifest, error) {
	var st Statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, &FileError{Path: results.SignatureFile, Reason: "payload is not an in-toto statement: " + err.Error()}
	}
	if st.Type != StatementType || st.PredicateType != PredicateType {
		return nil, &FileError{Path: results.SignatureFile, Reason: fmt.Sprintf("statement type %q, predicate %q: not tailgate's", st.Type, st.PredicateType)}
	}
	m := &Manifest{Schema: ManifestSchema}
	for _, s := range st.Subject {
		if s.Name == "" || filepath.IsAbs(s.Name) || strings.HasPrefix(filepath.Clean(filepath.FromSlash(s.Name)), "..") {
			return nil, &FileError{Path: results.SignatureFile, Reason: fmt.Sprintf("subject %q is not a path inside the pack", s.Name)}
		}
		m.Files = append(m.Files, File{Path: s.Name, SHA256: s.Digest["sha256"], Size: -1})
	}
	return m, checkSubjects(dir, m)
}

// checkSubjects is Check for a statement's subjects, which carry no
// sizes and include manifest.json.
func checkSubjects(dir string, m *Manifest) error {
	listed, err := checkFiles(dir, m.Files, func(want, got File) string {
		switch {
		case got.SHA256 != want.SHA256 && want.Path == results.ManifestFile:
			return "modified: it is not the manifest that was signed"
		case got.SHA256 != want.SHA256:
			return "modified: SHA-256 " + got.SHA256 + ", the attestation says " + want.SHA256
		}
		return ""
	})
	if err != nil {
		return err
	}
	now, err := Build(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, results.ManifestFile)); err == nil {
		now.Files = append(now.Files, File{Path: results.ManifestFile})
	}
	for _, f := range now.Files {
		if !listed[f.Path] {
			return &FileError{Path: f.Path, Reason: "not in the signed attestation (added after it was signed)"}
		}
	}
	return nil
}

func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
