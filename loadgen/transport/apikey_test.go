package transport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAPIKeyFromEnvOrFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("  sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvAPIKey, " sk-tailgate ")
	t.Setenv(EnvAPIKeyOpenAI, " sk-openai ")
	if k, err := APIKeyFromEnvOrFile(file); k != "sk-file" || err != nil {
		t.Errorf("file beside both variables: %q, %v; want the file's", k, err)
	}
	if k, err := APIKeyFromEnvOrFile(""); k != "sk-tailgate" || err != nil {
		t.Errorf("both variables: %q, %v; want $%s's", k, err, EnvAPIKey)
	}
	// An empty (or blank) neutral variable falls back to OpenAI's.
	t.Setenv(EnvAPIKey, " ")
	if k, err := APIKeyFromEnvOrFile(""); k != "sk-openai" || err != nil {
		t.Errorf("only $%s: %q, %v", EnvAPIKeyOpenAI, k, err)
	}
	t.Setenv(EnvAPIKeyOpenAI, "")
	if k, err := APIKeyFromEnvOrFile(""); k != "" || err != nil {
		t.Errorf("no key anywhere: %q, %v; want none", k, err)
	}

	missing := filepath.Join(dir, "missing")
	if _, err := APIKeyFromEnvOrFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, []byte("\n \n"), 0o600)
	if _, err := APIKeyFromEnvOrFile(empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty file: %v", err)
	}
	two := filepath.Join(dir, "two")
	_ = os.WriteFile(two, []byte("sk-one\nsk-two\n"), 0o600)
	if _, err := APIKeyFromEnvOrFile(two); err == nil || strings.Contains(err.Error(), "sk-") {
		t.Errorf("two-line file: %v; must name the file, never the key", err)
	}
}
