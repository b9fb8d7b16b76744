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
)

func cmdSign(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sign", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	key := fs.String("key", "", "Ed25519 private key, PEM PKCS #8 (required)")
	keygen := fs.Bool("keygen", false, "make a new key pair instead: --key gets the private key (mode 0600), --pub the public one")
	pub := fs.String("pub", "", "with --keygen: where the public key goes (default: KEY.pub)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: tailgate sign --key key.pem DIR\n       tailgate sign --keygen --key key.pem [--pub key.pub]\n\n"+
			"Signs a results directory: writes manifest.json (every file with its SHA-256) if missing, then\n"+
			"manifest.dsse.json, a DSSE envelope over it. Refuses a directory that no longer matches its manifest.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *key == "" {
		fs.Usage()
		return exitUsage
	}
	if *keygen {
		if fs.NArg() != 0 {
			fs.Usage()
			return exitUsage
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
		if err != nil {
			fmt.Fprintln(stderr, "tailgate sign:", err)
			return exitUsage
		}
		p, _ := evidence.ParsePublicKey(pubPEM)
		fmt.Fprintf(stdout, "private key %s, public key %s (key id %s)\n", *key, *pub, evidence.KeyID(p))
		return exitOK
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	b, err := os.ReadFile(*key)
	if err != nil {
		fmt.Fprintln(stderr, "tailgate sign:", err)
		return exitUsage
	}
	priv, err := evidence.ParsePrivateKey(b)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate sign: %s: %v\n", *key, err)
		return exitUsage
	}
	env, err := evidence.Sign(fs.Arg(0), priv)
	if err != nil {
		fmt.Fprintln(stderr, "tailgate sign:", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "signed %s/%s with key %s\n", fs.Arg(0), evidence.SignatureFile, env.Signatures[0].KeyID)
	return exitOK
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

func cmdVerify(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("verify", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	pub := fs.String("pub", "", "Ed25519 public key, PEM PKIX (required)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: tailgate verify --pub key.pub DIR\n\n"+
			"Checks DIR/manifest.dsse.json with the key, then every file against the signed manifest.\n"+
			"Exit 0 intact, 1 a signature or file does not match (the file is named), 2 usage.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *pub == "" || fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	b, err := os.ReadFile(*pub)
	if err != nil {
		fmt.Fprintln(stderr, "tailgate verify:", err)
		return exitUsage
	}
	key, err := evidence.ParsePublicKey(b)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate verify: %s: %v\n", *pub, err)
		return exitUsage
	}
	m, err := evidence.Verify(fs.Arg(0), key)
	if err != nil {
		fmt.Fprintln(stderr, "tailgate verify: FAILED:", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "verified %s: %d files match the manifest signed by %s\n", fs.Arg(0), len(m.Files), evidence.KeyID(key))
	return exitOK
}
