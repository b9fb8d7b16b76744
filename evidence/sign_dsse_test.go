package evidence

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
	"github.com/tailgate-llm/tailgate/results"
)

// TestSignVerifiesWithLibrary: the envelope our Sign writes is a standard
// DSSE envelope that go-securesystemslib's own verifier accepts, with the
// key loaded by the library from our PEM public key.
func TestSignVerifiesWithLibrary(t *testing.T) {
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := ParsePrivateKey(privPEM)
	pub, _ := ParsePublicKey(pubPEM)
	dir := pack(t)
	if _, err := Sign(dir, priv, SignOptions{Reviewer: "alice", Version: "v1.2.3"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, results.SignatureFile))
	if err != nil {
		t.Fatal(err)
	}
	// Only the standard fields, nothing of our own.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || len(fields) != 3 ||
		fields["payloadType"] == nil || fields["payload"] == nil || fields["signatures"] == nil {
		t.Fatalf("envelope fields %s", b)
	}
	var env dsse.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	key, err := signerverifier.LoadKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// The library's key id is its own (hex SHA-256 of the key's canonical
	// JSON), and it skips a signature whose key id differs; ours is the
	// SSH fingerprint, so a verifier that offers none matches it by
	// dsse.SHA256KeyID.
	ev, err := dsse.NewEnvelopeVerifier(noKeyID{sv})
	if err != nil {
		t.Fatal(err)
	}
	accepted, payload, err := ev.VerifyAndDecode(context.Background(), &env)
	if err != nil {
		t.Fatalf("library verifier: %v", err)
	}
	if len(accepted) != 1 || accepted[0].KeyID != KeyID(pub) || env.Signatures[0].KeyID != KeyID(pub) {
		t.Fatalf("accepted %+v, signatures %+v", accepted, env.Signatures)
	}
	var st Statement
	if env.PayloadType != AttestationPayloadType || json.Unmarshal(payload, &st) != nil || st.Type != StatementType {
		t.Fatalf("payload type %q, payload %q", env.PayloadType, payload)
	}
	// And the library refuses it once the payload changes.
	env.Payload = "e30K" // "{}\n"
	if _, err := ev.Verify(context.Background(), &env); err == nil {
		t.Fatal("library verified a changed payload")
	}
}

// noKeyID is a dsse.Verifier that offers no key id of its own.
type noKeyID struct{ dsse.Verifier }

func (noKeyID) KeyID() (string, error) { return "", nil }

// TestLibrarySignedVerifies: an envelope made directly by the library's
// signer over our manifest, with the library's key loading from our PEM
// private key and so its own key id, verifies with our Verify; and fails
// with another key.
func TestLibrarySignedVerifies(t *testing.T) {
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := ParsePublicKey(pubPEM)
	_, otherPub := keys(t)
	dir := pack(t)
	m, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := signerverifier.LoadKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	if key.KeyVal.Public != hex.EncodeToString(pub) {
		t.Fatal("library loaded another key")
	}
	sv, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(key)
	if err != nil {
		t.Fatal(err)
	}
	es, err := dsse.NewEnvelopeSigner(sv)
	if err != nil {
		t.Fatal(err)
	}
	env, err := es.SignPayload(context.Background(), PayloadType, m.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if env.Signatures[0].KeyID == KeyID(pub) || env.Signatures[0].KeyID == "" {
		t.Fatalf("library key id %q", env.Signatures[0].KeyID)
	}
	b, _ := json.Marshal(env)
	if err := os.WriteFile(filepath.Join(dir, results.SignatureFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Verify(dir, pub)
	if err != nil || len(got.Files) != len(m.Files) {
		t.Fatalf("verify library envelope: %v", err)
	}
	if _, err := Verify(dir, otherPub); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another key: %v", err)
	}
	// A signature that is not base64, or by another key, ahead of the good
	// one does not spoil it.
	env.Signatures = append([]dsse.Signature{{KeyID: "junk", Sig: "!!"}, {KeyID: KeyID(pub), Sig: "AAAA"}}, env.Signatures...)
	b, _ = json.Marshal(env)
	os.WriteFile(filepath.Join(dir, results.SignatureFile), b, 0o644)
	if _, err := Verify(dir, pub); err != nil {
		t.Fatalf("verify with extra signatures: %v", err)
	}
	env.Signatures = env.Signatures[:2]
	b, _ = json.Marshal(env)
	os.WriteFile(filepath.Join(dir, results.SignatureFile), b, 0o644)
	if _, err := Verify(dir, pub); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("only bad signatures: %v", err)
	}
	env.Signatures = nil
	b, _ = json.Marshal(env)
	os.WriteFile(filepath.Join(dir, results.SignatureFile), b, 0o644)
	if _, err := Verify(dir, pub); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("no signatures: %v", err)
	}

	// Our signer-verifier signs as the library's does, under our key id.
	priv, _ := ParsePrivateKey(privPEM)
	ours, err := signerVerifier(priv, pub)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := ours.KeyID(); id != KeyID(pub) {
		t.Fatalf("key id %q", id)
	}
}
