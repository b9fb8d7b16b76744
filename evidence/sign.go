package evidence

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
	"github.com/tailgate-llm/tailgate/results"
)

// PayloadType is the DSSE payload type of a signed manifest, as packs
// were signed before attestations; Verify still reads them.
const PayloadType = "application/vnd.tailgate.manifest+json"

// ErrBadSignature is returned (wrapped) when the envelope does not verify
// with the given key: a wrong key, or a changed manifest or signature.
var ErrBadSignature = errors.New("signature does not verify")

// Envelope is a DSSE envelope (github.com/secure-systems-lab/dsse,
// envelope.md): the payload (standard base64) and its type, and
// signatures over PAE(payloadType, payload). It is go-securesystemslib's
// dsse.Envelope, which makes, encodes and checks it.
type Envelope = dsse.Envelope

// Signature is one DSSE signature: a key id and the standard base64
// signature.
type Signature = dsse.Signature

// PAE is DSSE's pre-authentication encoding,
// "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, as dsse.PAE gives.
func PAE(payloadType string, body []byte) []byte {
	return dsse.PAE(payloadType, body)
}

// KeyID is a public key's id: its OpenSSH SHA-256 fingerprint
// ("SHA256:…"), from dsse.SHA256KeyID. It is "" for a key of the wrong
// length.
func KeyID(pub ed25519.PublicKey) string {
	id, err := dsse.SHA256KeyID(pub)
	if err != nil {
		return ""
	}
	return id
}

// signerVerifier is go-securesystemslib's Ed25519 dsse.SignerVerifier for
// pub (and priv, when signing), under our key id. The library loads keys
// from its own JSON or from PEM, so the key is handed over as its
// hex-encoded SSLibKey form.
func signerVerifier(priv ed25519.PrivateKey, pub ed25519.PublicKey) (*signerverifier.ED25519SignerVerifier, error) {
	k := &signerverifier.SSLibKey{
		KeyIDHashAlgorithms: signerverifier.KeyIDHashAlgorithms,
		KeyType:             signerverifier.ED25519KeyType,
		Scheme:              signerverifier.ED25519KeyType,
		KeyID:               KeyID(pub),
		KeyVal:              signerverifier.KeyVal{Public: hex.EncodeToString(pub)},
	}
	if priv != nil {
		k.KeyVal.Private = hex.EncodeToString(priv)
	}
	return signerverifier.NewED25519SignerVerifierFromSSLibKey(k)
}

// Sign signs dir as an in-toto attestation with priv and writes
// dir/manifest.dsse.json: a DSSE envelope over a Statement whose subjects
// are every file of the pack, manifest.json included, and whose predicate
// says what was judged (see Predicate). With no manifest.json it writes
// one first; an existing one must still match the files (Check), so a pack
// changed after its manifest was made is refused rather than signed over.
func Sign(dir string, priv ed25519.PrivateKey, opt SignOptions) (*Envelope, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("not an Ed25519 private key")
	}
	m, raw, err := Read(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if m, err = Write(dir); err != nil {
			return nil, err
		}
		raw = m.Marshal()
	case err != nil:
		return nil, err
	default:
		if err := Check(dir, m); err != nil {
			return nil, fmt.Errorf("refusing to sign: the directory no longer matches %s: %w", results.ManifestFile, err)
		}
	}
	st, err := statement(dir, m, raw, opt)
	if err != nil {
		return nil, err
	}
	payload, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	sv, err := signerVerifier(priv, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	es, err := dsse.NewEnvelopeSigner(sv)
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(context.Background(), AttestationPayloadType, payload)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(filepath.Join(dir, results.SignatureFile), append(b, '\n')); err != nil {
		return nil, err
	}
	return env, nil
}

// Verify checks dir against its signature with pub: the signature, then
// every file against the signed attestation's subjects (or, for a pack
// signed before attestations, against the signed manifest). The error
// names what is wrong: ErrBadSignature (wrapped) for a wrong key or
// altered signature, a *FileError for the first modified, missing or added
// file.
func Verify(dir string, pub ed25519.PublicKey) (*Manifest, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("not an Ed25519 public key")
	}
	b, err := os.ReadFile(filepath.Join(dir, results.SignatureFile))
	if err != nil {
		return nil, fmt.Errorf("no signature: %w", err)
	}
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, &FileError{Path: results.SignatureFile, Reason: "not a DSSE envelope: " + err.Error()}
	}
	if env.PayloadType != AttestationPayloadType && env.PayloadType != PayloadType {
		return nil, &FileError{Path: results.SignatureFile, Reason: fmt.Sprintf("payload type %q, want %q", env.PayloadType, AttestationPayloadType)}
	}
	if _, err := env.DecodeB64Payload(); err != nil {
		return nil, &FileError{Path: results.SignatureFile, Reason: "payload is not base64"}
	}
	sv, err := signerVerifier(nil, pub)
	if err != nil {
		return nil, err
	}
	ev, err := dsse.NewEnvelopeVerifier(sv)
	if err != nil {
		return nil, err
	}
	// Any signature made by pub will do, whatever key id it claims (a DSSE
	// key id is an unauthenticated hint, and other signers, the library's
	// own with its hex key ids among them, name keys differently), and one
	// that is not even base64 does not spoil the others. So the library
	// checks each signature alone, without its key id.
	var payload []byte
	ok := false
	for _, sg := range env.Signatures {
		one := env
		one.Signatures = []Signature{{Sig: sg.Sig}}
		if _, body, err := ev.VerifyAndDecode(context.Background(), &one); err == nil {
			payload, ok = body, true
			break
		}
	}
	if !ok {
		return nil, fmt.Errorf("%s: %w with key %s", results.SignatureFile, ErrBadSignature, KeyID(pub))
	}
	if env.PayloadType == AttestationPayloadType {
		return checkStatement(dir, payload)
	}
	// A pack signed before attestations: the payload is manifest.json.
	disk, err := os.ReadFile(filepath.Join(dir, results.ManifestFile))
	if err != nil {
		return nil, &FileError{Path: results.ManifestFile, Reason: "missing"}
	}
	if !bytes.Equal(disk, payload) {
		return nil, &FileError{Path: results.ManifestFile, Reason: "modified: it is not the manifest that was signed"}
	}
	m, err := parseManifest(payload)
	if err != nil {
		return nil, err
	}
	if err := Check(dir, m); err != nil {
		return nil, err
	}
	return m, nil
}

// GenerateKey makes an Ed25519 key pair as PEM: PKCS #8 private, PKIX
// public.
func GenerateKey() (privPEM, pubPEM []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pk, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pk}), nil
}

// ParsePrivateKey reads a PEM PKCS #8 Ed25519 private key.
func ParsePrivateKey(b []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM PRIVATE KEY (PKCS #8)")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an Ed25519 key", k)
	}
	return priv, nil
}

// ParsePublicKey reads a PEM PKIX Ed25519 public key.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM PUBLIC KEY (PKIX)")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an Ed25519 key", k)
	}
	return pub, nil
}
