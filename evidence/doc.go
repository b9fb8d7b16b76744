// Package evidence makes a run's output directory reviewable later: a
// manifest of every file with its SHA-256, the environment the run had
// (host, CPU, OS, Go, tool version, redacted command line, the server's
// models and version headers, GPUs), exact copies of the input files, and
// a DSSE-signed manifest that Verify checks file by file.
//
// The signature covers manifest.json's exact bytes (DSSE payload type
// application/vnd.tailgate.manifest+json, Ed25519, key id the key's
// OpenSSH SHA-256 fingerprint). The envelope, its pre-authentication
// encoding and the signature check are go-securesystemslib's dsse package
// with its signerverifier's Ed25519 signer-verifier; keys stay PEM
// (PKCS #8 private, PKIX public). Verify accepts any signature that the
// given key made, whatever key id it claims. Verify checks the
// signature first, then that manifest.json on disk is the signed one, then
// every listed file's size and hash, then that no file was added. Its
// error names the first file that differs.
package evidence
