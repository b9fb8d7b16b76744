package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/slo"
)

// tailgate sim --engines 2 --restart-engine 1@…: two engines' series, and
// engine 1 restarted once a scrape has seen it idle.
func TestSimEnginesAndRestartFlag(t *testing.T) {
	var stderr bytes.Buffer
	if code := cmdSim(context.Background(), []string{"--restart-engine", "1@1s"}, &stderr, &stderr); code != slo.ExitUsage ||
		!strings.Contains(stderr.String(), "needs --engines 2 or more") {
		t.Errorf("restart without engines: %d %q", code, stderr.String())
	}
	stderr.Reset()
	if code := cmdSim(context.Background(), []string{"--restart-engine", "one"}, &stderr, &stderr); code != slo.ExitUsage ||
		!strings.Contains(stderr.String(), "want ENGINE@DURATION") {
		t.Errorf("bad restart: %d %q", code, stderr.String())
	}

	ready := filepath.Join(t.TempDir(), "url")
	ctx, cancel := context.WithCancel(context.Background())
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cmdSim(ctx, []string{"--addr", "127.0.0.1:0", "--engines", "2", "--restart-engine", "1@50ms", "--ready-file", ready}, &out, &out)
	}()
	defer func() {
		cancel()
		if code := <-done; code != slo.ExitOK {
			t.Errorf("exit %d: %s", code, out.String())
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	var url string
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ready); err == nil {
			url = strings.TrimSpace(string(b))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if url == "" {
		t.Fatalf("not ready: %s", out.String())
	}
	for time.Now().Before(deadline) && !strings.Contains(out.String(), "engine 1 restarted") {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if !strings.Contains(b.String(), `engine="1"`) {
			t.Fatalf("no engine 1 series:\n%s", b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := out.String(); !strings.Contains(s, "2 engines of") || !strings.Contains(s, "engine 1 restarted") {
		t.Errorf("output %q", s)
	}
}
