package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// ServerInfo is what the server says about itself: the models it lists at
// /v1/models and its version-bearing response headers (Server, and any
// header whose name mentions "version"). It goes into the evidence pack.
type ServerInfo struct {
	Models  []string          `json:"models"`
	Headers map[string]string `json:"headers,omitempty"`
}

// modelsURL is the /v1/models URL beside the completions endpoint.
func (c *Client) modelsURL() string {
	for _, ep := range []string{"/chat/completions", "/completions"} {
		if i := strings.LastIndex(c.url, ep); i >= 0 {
			return c.url[:i] + "/models"
		}
	}
	return c.url
}

// Server fetches /v1/models with the client's headers (the API key
// included). It fails with a message naming the URL, never the key.
func (c *Client) Server(ctx context.Context) (ServerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	u := c.modelsURL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return ServerInfo{}, fmt.Errorf("GET %s: %v", u, err)
	}
	req.Header = c.header.Clone()
	req.Header.Set("Accept", "application/json")
	req.Header.Del("Content-Type")
	if c.host != "" {
		req.Host = c.host
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ServerInfo{}, fmt.Errorf("GET %s: %s", u, c.scrub(errText(err)))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ServerInfo{}, fmt.Errorf("GET %s: reading body: %s", u, c.scrub(err.Error()))
	}
	info := ServerInfo{Headers: map[string]string{}}
	for name, vals := range resp.Header {
		ln := strings.ToLower(name)
		if ln == "server" || strings.Contains(ln, "version") {
			info.Headers[ln] = c.scrub(strings.Join(vals, ", "))
		}
	}
	if resp.StatusCode != http.StatusOK {
		return info, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return info, fmt.Errorf("GET %s: not a model list: %v", u, err)
	}
	for _, m := range list.Data {
		if m.ID != "" {
			info.Models = append(info.Models, m.ID)
		}
	}
	sort.Strings(info.Models)
	return info, nil
}

// DiscoverModel returns the first model the server lists, for runs that
// name none.
func (c *Client) DiscoverModel(ctx context.Context) (string, error) {
	info, err := c.Server(ctx)
	if err != nil {
		return "", err
	}
	if len(info.Models) == 0 {
		return "", errors.New("the server lists no models at " + c.modelsURL())
	}
	return info.Models[0], nil
}

// SetModel sets the model sent in requests (after DiscoverModel). Call it
// before the first Do: it is not synchronised with requests in flight.
func (c *Client) SetModel(m string) { c.model = m }

func errText(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return ue.Unwrap().Error()
	}
	return err.Error()
}

// scrub removes every known secret from s.
func (c *Client) scrub(s string) string {
	for _, k := range c.secrets {
		s = strings.ReplaceAll(s, k, "[redacted]")
	}
	return s
}
