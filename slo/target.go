package slo

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/tailgate-llm/tailgate/internal/redact"
)

// envRef is a reference to an environment variable in a plan's target:
// ${NAME}. Only the braced form, so a literal '$' in a URL stays one.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// checkTarget says what is wrong with a plan's target as written ("" when
// nothing): it must be a URL, and it must not carry a credential, because
// the plan is copied byte for byte into the evidence pack a reviewer
// receives. A credential goes in an environment reference instead
// (http://user:${TOKEN}@host, ?api_key=${KEY}), expanded by TargetURL.
func checkTarget(target string) string {
	// Each reference stands as a plain word while the URL is parsed
	// (braces are not valid in user info); a value that is nothing but
	// references holds no literal secret.
	const ref = "TAILGATEENVREF"
	u, err := url.Parse(envRef.ReplaceAllString(target, ref))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "grpc") || u.Host == "" {
		return fmt.Sprintf("%q is not a URL (http://host:port, https://…, grpc://…)", redact.URL(target))
	}
	literal := func(v string) bool { return strings.ReplaceAll(v, ref, "") != "" }
	var what string
	if u.User != nil {
		pw, hasPW := u.User.Password()
		switch {
		case hasPW && literal(pw):
			what = fmt.Sprintf("the password of user %q", u.User.Username())
		case !hasPW && literal(u.User.Username()):
			what = "user info (a token before '@')"
		}
	}
	if what == "" {
		for k, vs := range u.Query() {
			for _, v := range vs {
				if redact.SecretName(k) && literal(v) {
					what = fmt.Sprintf("query parameter %q", k)
				}
			}
		}
	}
	if what == "" {
		return ""
	}
	return fmt.Sprintf("%s carries a credential (%s), and the plan is copied into the evidence pack: write an environment reference such as ${TOKEN} in its place, or pass the key with --api-key-file or --header", redact.URL(target), what)
}

// TargetURL is the plan's target with its ${NAME} references replaced by
// the environment's values; an unset variable is an error naming the
// plan's file and line.
func (p *Plan) TargetURL() (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(p.Target, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", &Error{File: p.File, Line: p.targetLine, Field: "target",
			Err: fmt.Errorf("%s is not set in the environment", "${"+strings.Join(missing, "}, ${")+"}")}
	}
	return out, nil
}
