package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tailgate-llm/tailgate/internal/field"
)

// ScrapeConfig is one Prometheus text endpoint to scrape: the inference
// server's /metrics, or a dcgm-exporter (port 9400) beside it.
type ScrapeConfig struct {
	// URL is the full endpoint, e.g. http://host:8000/metrics. Only its
	// scheme, host and path are ever recorded (user info and query, which
	// may hold credentials, are dropped).
	URL string
	// Headers are sent with every scrape (e.g. Authorization). They are
	// never logged or written anywhere.
	Headers http.Header
	// Timeout bounds one scrape, connection to end of body. Zero, or a
	// value not below the sampling interval, means 90% of the interval, so a
	// hanging endpoint never delays the next sample.
	Timeout time.Duration
}

// maxBodyBytes caps one scrape's body; vLLM with many LoRA adapters stays
// far below.
const maxBodyBytes = 64 << 20

// acceptHeader asks for the classic text format, which the parser reads;
// OpenMetrics only as a fallback.
const acceptHeader = "text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.1,*/*;q=0.05"

// sourceName is raw without user info, query or fragment: safe to record.
func sourceName(raw string, i int) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Sprintf("scrape[%d] (invalid URL)", i)
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// scraper fetches and normalises one endpoint.
type scraper struct {
	cfg     ScrapeConfig
	name    string
	timeout time.Duration
	client  *http.Client
	opts    ParseOptions
	// prom is the Prometheus URL read instead of cfg.URL once cfg.URL
	// answered JSON (trtllm-serve); note says so, for the Summary.
	prom atomic.Pointer[string]
	note atomic.Pointer[string]
}

// NoteTRTLLMServe is a source's note when its /metrics answered JSON and
// /prometheus/metrics beside it was read instead.
const NoteTRTLLMServe = "/metrics answers JSON (trtllm-serve's iteration stats); read /prometheus/metrics instead"

// scrape returns the normalised sample, or an error that names neither
// headers nor the URL's secret parts. A parse error part-way returns both
// what was read and the error.
func (s *scraper) scrape(ctx context.Context) (*ServerSample, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if p := s.prom.Load(); p != nil {
		return s.scrapeURL(ctx, *p, false)
	}
	return s.scrapeURL(ctx, s.cfg.URL, true)
}

// scrapeURL fetches and parses raw. With fallback, an answer in JSON from a
// URL ending in /metrics (trtllm-serve's) is followed by a scrape of
// /prometheus/metrics on the same server, which is used from then on.
func (s *scraper) scrapeURL(ctx context.Context, raw string, fallback bool) (*ServerSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, errors.New("invalid URL")
	}
	if s.cfg.Headers != nil {
		req.Header = s.cfg.Headers.Clone()
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", acceptHeader)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, s.describe(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusNotImplemented {
			return nil, &noEndpointError{status: resp.Status, ollama: s.isOllama(ctx)}
		}
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); strings.Contains(ct, "protobuf") {
		return nil, fmt.Errorf("unsupported Content-Type %q (want text/plain)", ct)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		return nil, s.describe(ctx, err)
	}
	if len(body) > maxBodyBytes {
		return nil, fmt.Errorf("body larger than %d MiB", maxBodyBytes>>20)
	}
	if looksJSON(resp.Header.Get("Content-Type"), body) {
		if u, err := url.Parse(raw); fallback && err == nil && strings.HasSuffix(u.Path, "/metrics") {
			u.Path = strings.TrimSuffix(u.Path, "/metrics") + "/prometheus/metrics"
			u.RawPath = ""
			alt := u.String()
			if sample, err := s.scrapeURL(ctx, alt, false); err == nil {
				s.prom.Store(&alt)
				note := NoteTRTLLMServe
				s.note.Store(&note)
				return sample, nil
			}
		}
		return nil, &field.Error{Field: "MetricsURL", Hint: "for trtllm-serve, set {} to …/prometheus/metrics", Err: errors.New("answered JSON, not Prometheus text")}
	}
	sample, err := ParseExpositionWith(bytes.NewReader(body), s.opts)
	if err != nil {
		return sample, fmt.Errorf("parse: %w", err)
	}
	return sample, nil
}

func (s *scraper) describe(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %v", s.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its message repeats the full URL
	}
	return err
}

// noEndpointError is a scrape answered 404 or 501: the server has no
// metrics there. A source that never answered otherwise is not asked again
// (Ollama has no /metrics: one error, not one a second).
type noEndpointError struct {
	status string
	ollama bool // the server's root says "Ollama is running"
}

func (e *noEndpointError) Error() string {
	if e.ollama {
		return fmt.Sprintf("HTTP %s: Ollama serves no Prometheus metrics; not scraped again", e.status)
	}
	return fmt.Sprintf("HTTP %s: no metrics at this URL; not scraped again", e.status)
}

// isOllama asks the server's root, where Ollama answers "Ollama is running".
func (s *scraper) isOllama(ctx context.Context) bool {
	u, err := url.Parse(s.cfg.URL)
	if err != nil {
		return false
	}
	u.Path, u.RawPath, u.RawQuery = "/", "", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false
	}
	if s.cfg.Headers != nil {
		req.Header = s.cfg.Headers.Clone()
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "Ollama is running")
}

// looksJSON reports whether a /metrics answer is JSON rather than
// Prometheus text: by its Content-Type, or a body that is a JSON array
// (trtllm-serve's list of iteration stats; a "{" could open a quoted
// UTF-8 metric name).
func looksJSON(contentType string, body []byte) bool {
	if strings.Contains(contentType, "json") {
		return true
	}
	b := bytes.TrimSpace(body)
	return len(b) > 0 && b[0] == '['
}
