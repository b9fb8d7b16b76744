package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

func cmdSign(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("sign", pflag.ContinueOnError)
	key := fs.String("key", "", "Ed25519 private key, PEM PKCS #8 (required)")
	keygen := fs.Bool("keygen", false, "make a new key pair instead: --key gets the private key (mode 0600), --pub the public one")
	pub := fs.String("pub", "", "with --keygen: where the public key goes (default: KEY.pub)")
	reviewer := fs.String("reviewer", "", "who reviewed and signs the pack, recorded in the attestation")
	fs.StringVar(reviewer, "by", "", "same as --reviewer")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate sign --key key.pem DIR\n       tailgate sign --keygen --key key.pem [--pub key.pub]\n\n"+
			"Signs a results directory: writes "+results.ManifestFile+" (every file with its SHA-256) if missing, then\n"+
			results.SignatureFile+", a DSSE envelope over an in-toto Statement v1 whose subjects are every file\n"+
			"with its SHA-256 and whose predicate is the verdict (plan, SLO, verdicts, waivers, validity,\n"+
			"environment, reviewer). Standard in-toto tooling verifies it without tailgate. Refuses a\n"+
			"directory that no longer matches its manifest.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *key == "" {
		return usageErr("--key is required\nRun 'tailgate help sign' for the flags.")
	}
	if *keygen {
		if fs.NArg() != 0 {
			return usageErr("--keygen takes no directory")
		}
		if *pub == "" {
			*pub = strings.TrimSuffix(*key, ".pem") + ".pub"
		}
		privPEM, pubPEM, err := evidence.GenerateKey()
		if err == nil {
			err = writeNew(*key, privPEM, 0o600)
		}
		if err == nil {
			err = writeNew(*pub, pubPEM, 0o644)
		}
		if errors.Is(err, os.ErrExist) {
			return usageErr("%v: will not overwrite a key", err)
		}
		if err != nil {
			return &results.WriteError{Path: *key, Err: err}
		}
		p, _ := evidence.ParsePublicKey(pubPEM)
		fmt.Fprintf(stdout, "private key %s, public key %s (key id %s)\n", *key, *pub, evidence.KeyID(p))
		return nil
	}
	if fs.NArg() != 1 {
		return usageErr("want one results directory\nRun 'tailgate help sign' for the flags.")
	}
	dir := results.Dir(fs.Arg(0))
	if !dir.HasResults() {
		if _, err := os.Stat(dir.Path(results.VerdictFile)); err != nil {
			return usageErr("%s holds no results (no %s, %s or %s): nothing to sign", dir, results.SummaryFile, results.RecordsFile, results.VerdictFile)
		}
	}
	b, err := os.ReadFile(*key)
	if err != nil {
		return err
	}
	priv, err := evidence.ParsePrivateKey(b)
	if err != nil {
		return fmt.Errorf("%s: %w", *key, err)
	}
	env, err := evidence.Sign(fs.Arg(0), priv, evidence.SignOptions{Reviewer: *reviewer, Version: version.Version})
	if err != nil {
		return &exitError{code: slo.ExitFailed, err: err}
	}
	fmt.Fprintf(stdout, "signed %s/%s (in-toto attestation) with key %s\n", fs.Arg(0), results.SignatureFile, env.Signatures[0].KeyID)
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func cmdVerify(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("verify", pflag.ContinueOnError)
	pub := fs.String("pub", "", "Ed25519 public key, PEM PKIX (required)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate verify --pub key.pub DIR\n\n"+
			"Checks DIR/"+results.SignatureFile+" with the key, then every file against the signed attestation's\n"+
			"subjects (a pack signed before attestations: against the signed manifest).\n"+
			"Exit 0 intact, 1 a signature or file does not match (the file is named), 2 usage.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *pub == "" || fs.NArg() != 1 {
		return usageErr("want --pub KEY and one results directory\nRun 'tailgate help verify' for the flags.")
	}
	b, err := os.ReadFile(*pub)
	if err != nil {
		return err
	}
	key, err := evidence.ParsePublicKey(b)
	if err != nil {
		return fmt.Errorf("%s: %w", *pub, err)
	}
	m, err := evidence.Verify(fs.Arg(0), key)
	if err != nil {
		return &exitError{code: slo.ExitFailed, err: fmt.Errorf("FAILED: %w", err)}
	}
	fmt.Fprintf(stdout, "verified %s: %d files match the manifest signed by %s\n", fs.Arg(0), len(m.Files), evidence.KeyID(key))
	return nil
}
