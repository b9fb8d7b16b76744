package evidence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// PayloadType is the DSSE payload type of a signed manifest.
const PayloadType = "application/vnd.tailgate.manifest+json"

// ErrBadSignature is returned (wrapped) when the envelope does not verify
// with the given key: a wrong key, or a changed manifest or signature.
var ErrBadSignature = errors.New("signature does not verify")

// Envelope is a DSSE envelope (github.com/secure-systems-lab/dsse,
// envelope.md): the payload and its type, and signatures over
// PAE(payloadType, payload). It has the same JSON form as
// go-securesystemslib's dsse.Envelope, whose package is not used here
// because it pulls in golang.org/x/crypto/ssh for key ids.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"` // standard base64
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"` // standard base64
}

// PAE is DSSE's pre-authentication encoding:
// "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body.
func PAE(payloadType string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(body)))
	b.WriteByte(' ')
	b.Write(body)
	return b.Bytes()
}

// KeyID is a public key's id: its OpenSSH SHA-256 fingerprint
// ("SHA256:…"), as go-securesystemslib's dsse.SHA256KeyID gives.
func KeyID(pub ed25519.PublicKey) string {
	const algo = "ssh-ed25519"
	wire := binary.BigEndian.AppendUint32(nil, uint32(len(algo)))
	wire = append(wire, algo...)
	wire = binary.BigEndian.AppendUint32(wire, uint32(len(pub)))
	wire = append(wire, pub...)
	sum := sha256.Sum256(wire)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

func decodeB64(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.URLEncoding.DecodeString(s)
}

// Sign signs dir's manifest with priv and writes dir/manifest.dsse.json.
// With no manifest.json it writes one first; an existing one must still
// match the files (Check), so a pack changed after its manifest was made
// is refused rather than signed over.
func Sign(dir string, priv ed25519.PrivateKey) (*Envelope, error) {
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
			return nil, fmt.Errorf("refusing to sign: the directory no longer matches %s: %w", ManifestFile, err)
		}
	}
	pub := priv.Public().(ed25519.PublicKey)
	env := &Envelope{PayloadType: PayloadType, Payload: base64.StdEncoding.EncodeToString(raw),
		Signatures: []Signature{{KeyID: KeyID(pub),
			Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, PAE(PayloadType, raw)))}}}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(filepath.Join(dir, SignatureFile), append(b, '\n')); err != nil {
		return nil, err
	}
	return env, nil
}

// Verify checks dir against its signed manifest with pub: the signature,
// then manifest.json against the signed payload, then every file. The
// error names what is wrong: ErrBadSignature (wrapped) for a wrong key or
// altered signature, a *FileError for the first modified, missing or added
// file.
func Verify(dir string, pub ed25519.PublicKey) (*Manifest, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("not an Ed25519 public key")
	}
	b, err := os.ReadFile(filepath.Join(dir, SignatureFile))
	if err != nil {
		return nil, fmt.Errorf("no signature: %w", err)
	}
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, &FileError{Path: SignatureFile, Reason: "not a DSSE envelope: " + err.Error()}
	}
	if env.PayloadType != PayloadType {
		return nil, &FileError{Path: SignatureFile, Reason: fmt.Sprintf("payload type %q, want %q", env.PayloadType, PayloadType)}
	}
	payload, err := decodeB64(env.Payload)
	if err != nil {
		return nil, &FileError{Path: SignatureFile, Reason: "payload is not base64"}
	}
	// Any signature made by pub will do, whatever key id it claims.
	ok := false
	for _, sg := range env.Signatures {
		if sig, err := decodeB64(sg.Sig); err == nil && ed25519.Verify(pub, PAE(env.PayloadType, payload), sig) {
			ok = true
			break
		}
	}
	if !ok {
		return nil, fmt.Errorf("%s: %w with key %s", SignatureFile, ErrBadSignature, KeyID(pub))
	}
	disk, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, &FileError{Path: ManifestFile, Reason: "missing"}
	}
	if !bytes.Equal(disk, payload) {
		return nil, &FileError{Path: ManifestFile, Reason: "modified: it is not the manifest that was signed"}
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
