package transport

import (
	"fmt"
	"os"
	"strings"
)

// The environment variables an API key is read from, in this order: the
// protocol-neutral one, then OpenAI's, which tools and users of
// OpenAI-compatible servers already set.
const (
	EnvAPIKey       = "TAILGATE_API_KEY"
	EnvAPIKeyOpenAI = "OPENAI_API_KEY"
)

// APIKeyFromEnvOrFile returns the API key: from file when file is set,
// otherwise from $TAILGATE_API_KEY, otherwise from $OPENAI_API_KEY (empty
// when neither is set), surrounding white space trimmed. Errors name the
// file, never its contents.
func APIKeyFromEnvOrFile(file string) (string, error) {
	if file == "" {
		for _, env := range []string{EnvAPIKey, EnvAPIKeyOpenAI} {
			if k := strings.TrimSpace(os.Getenv(env)); k != "" {
				return k, nil
			}
		}
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("API key file: %w", err) // *PathError names the file
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("API key file %s: empty", file)
	}
	if strings.ContainsAny(key, "\r\n") {
		return "", fmt.Errorf("API key file %s: more than one line", file)
	}
	return key, nil
}
