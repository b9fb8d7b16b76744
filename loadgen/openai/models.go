package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// Side requests (the model list) are bounded so that a target that does
// not answer fails a preflight within seconds, not at the run's end.
const (
	PreflightTimeout = 10 * time.Second
	describeTimeout  = 5 * time.Second
	maxModelsBytes   = 1 << 20
)

// modelsURL is the /v1/models URL beside the completions endpoint.
func (c *Client) modelsURL() string {
	for _, ep := range []string{"/chat/completions", "/completions"} {
		if i := strings.LastIndex(c.url, ep); i >= 0 {
			return c.url[:i] + "/models" + c.url[i+len(ep):] // keep a query string
		}
	}
	return c.url
}

// models fetches /v1/models with the client's headers (the API key
// included) and keeps the server's version-bearing headers (Server, and
// any whose name mentions "version"). Errors name the URL redacted and
// are scrubbed of every credential.
func (c *Client) models(ctx context.Context) (loadgen.ServerInfo, error) {
	u := c.modelsURL()
	info := loadgen.ServerInfo{URL: c.safeURL}
	where := "GET " + c.http.Scrub(u)
	resp, err := c.http.SideRequest(ctx, http.MethodGet, u, "application/json")
	if err != nil {
		return info, &transport.Unanswered{Target: c.safeURL, Request: where, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBytes))
	for name, vals := range resp.Header {
		ln := strings.ToLower(name)
		if ln == "server" || strings.Contains(ln, "version") {
			if info.Headers == nil {
				info.Headers = map[string]string{}
			}
			info.Headers[ln] = c.http.Scrub(strings.Join(vals, ", "))
		}
	}
	if resp.StatusCode != http.StatusOK {
		return info, &transport.StatusError{Target: c.safeURL, Request: where, Code: resp.StatusCode, Words: c.http.Scrub(transport.ErrorWords(body))}
	}
	if err != nil {
		_, msg := transport.ClassifyBody(ctx, err, "reading the model list")
		return info, &transport.Unanswered{Target: c.safeURL, Request: where, Err: redact.Wrap(c.http.Scrub(msg), err)}
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return info, fmt.Errorf("target %s: %s: not a model list: %w", c.safeURL, where, err)
	}
	for _, m := range list.Data {
		if m.ID != "" {
			info.Models = append(info.Models, m.ID)
		}
	}
	sort.Strings(info.Models)
	return info, nil
}

// DescribeServer reports the models the server lists and its version
// headers, for environment.json. Failure is in ServerInfo.Error.
func (c *Client) DescribeServer(ctx context.Context) loadgen.ServerInfo {
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	info, err := c.models(ctx)
	if err != nil {
		info.Error = err.Error()
	}
	c.describeSelf(ctx, &info)
	return info
}

// describeSelf reads what the server says about itself, best effort:
// vLLM's /version ({"version"}), llama.cpp's /props (build_info,
// total_slots, default_generation_settings.n_ctx). A server without them
// (404) leaves info as it is.
func (c *Client) describeSelf(ctx context.Context, info *loadgen.ServerInfo) {
	root := c.rootURL()
	if root == "" {
		return
	}
	get := func(path string, v any) bool {
		code, b, err := c.http.Fetch(ctx, http.MethodGet, root+path, maxModelsBytes)
		return err == nil && code == http.StatusOK && json.Unmarshal(b, v) == nil
	}
	var ver struct {
		Version string `json:"version"`
	}
	if get("/version", &ver) && ver.Version != "" {
		info.Version = ver.Version
	}
	var props struct {
		BuildInfo string `json:"build_info"`
		Slots     int    `json:"total_slots"`
		Defaults  struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if get("/props", &props) {
		if props.BuildInfo != "" {
			info.Version = props.BuildInfo
		}
		info.Slots, info.ContextLength = props.Slots, props.Defaults.NCtx
	}
}

// rootURL is the server root: the endpoint without its /v1/… path and
// query ("" when the URL has no /v1 to strip).
func (c *Client) rootURL() string {
	u := c.url
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	i := strings.LastIndex(u, "/v1/")
	if i < 0 {
		return ""
	}
	return u[:i]
}

// Preflight checks within PreflightTimeout that the target answers and,
// when it lists its models, that the configured model is one of them. A
// server without /v1/models (404, 405, 501) passes: it answers, and
// nothing more can be checked without a request to the model.
func (c *Client) Preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	info, err := c.models(ctx)
	switch {
	case err == nil:
	case noList(err):
		return nil
	default:
		return err // names the target and the URL tried
	}
	if c.model == "" || serves(info.Models, c.model) {
		return nil
	}
	return loadgen.NotServed(fmt.Errorf("target %s does not serve model %q: it lists %s", c.safeURL, c.model, listModels(info.Models)))
}

// noList reports whether err is a server without /v1/models (404, 405,
// 501): it answers, with no list to check.
func noList(err error) bool {
	var se *transport.StatusError
	return errors.As(err, &se) && (se.Code == http.StatusNotFound || se.Code == http.StatusMethodNotAllowed || se.Code == http.StatusNotImplemented)
}

// serves reports whether a server listing models serves model: listed,
// or listed as Ollama's "model:latest", or the list is empty or
// llama.cpp's (anyName), which leaves nothing to check.
func serves(models []string, model string) bool {
	latest := !strings.Contains(model, ":") && slices.Contains(models, model+":latest")
	return len(models) == 0 || slices.Contains(models, model) || latest || anyName(models)
}

// CheckModels checks within PreflightTimeout that the server lists every
// one of models (vLLM and llm-d list LoRA adapters beside the base model
// in /v1/models), and refuses naming each one missing and what the server
// lists. A server without a model list passes, as in Preflight.
func (c *Client) CheckModels(ctx context.Context, models []string) error {
	if len(models) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	info, err := c.models(ctx)
	switch {
	case err == nil:
	case noList(err):
		return nil
	default:
		return fmt.Errorf("checking the mix's models: %w", err)
	}
	var missing []string
	for _, m := range models {
		if !serves(info.Models, m) {
			missing = append(missing, fmt.Sprintf("%q", m))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return loadgen.NotServed(fmt.Errorf("target %s does not serve %s that the mix names: it lists %s",
		c.safeURL, strings.Join(missing, ", "), listAll(info.Models)))
}

// listAll quotes every model listed: a refusal of the mix's models is
// read to pick the right names, so none is left out.
func listAll(m []string) string {
	q := make([]string, len(m))
	for i, s := range m {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// anyName reports whether a model list is llama.cpp's: one model, listed
// by its file's path (/models/tiny.gguf), served whatever name a request
// gives, so any name passes.
func anyName(models []string) bool {
	if len(models) != 1 {
		return false
	}
	m := models[0]
	return strings.HasSuffix(m, ".gguf") || strings.HasPrefix(m, "/") || strings.HasPrefix(m, "./")
}

func listModels(m []string) string {
	const show = 5
	q := make([]string, 0, show)
	for i, s := range m {
		if i == show {
			return strings.Join(q, ", ") + fmt.Sprintf(" and %d more", len(m)-show)
		}
		q = append(q, fmt.Sprintf("%q", s))
	}
	return strings.Join(q, ", ")
}

// DiscoverModel returns the first model the server lists (in sorted
// order), for runs that name none.
func (c *Client) DiscoverModel(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	info, err := c.models(ctx)
	if err != nil {
		return "", &transport.Undiscovered{Target: c.safeURL, Err: err}
	}
	if len(info.Models) == 0 {
		return "", &transport.Undiscovered{Target: c.safeURL, Why: "GET " + c.http.Scrub(c.modelsURL()) + " lists no models"}
	}
	return info.Models[0], nil
}

// SetModel sets the model sent in requests (after DiscoverModel). Call it
// before the first Do: it is not synchronised with requests in flight.
func (c *Client) SetModel(m string) { c.model = m }
