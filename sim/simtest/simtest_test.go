package simtest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

func TestStartServesAndCloses(t *testing.T) {
	var url string
	t.Run("inner", func(t *testing.T) {
		srv := simtest.Start(t, sim.Config{FixedTTFT: time.Millisecond})
		url = srv.URL
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("URL %q: want a loopback http URL", url)
		}
		resp, err := http.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"hi","max_tokens":2}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"text":" the of"`) {
			t.Fatalf("HTTP %d %s", resp.StatusCode, body)
		}
		if n := len(srv.Truth()); n != 1 {
			t.Errorf("truth has %d requests, want 1", n)
		}
		if err := srv.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	// The inner test's cleanup closed the listener.
	c := &http.Client{Timeout: 2 * time.Second}
	if resp, err := c.Get(url + "/health"); err == nil {
		resp.Body.Close()
		t.Fatalf("%s still answers after the test that started it ended", url)
	}
}

// A bad configuration fails the test that asked for it (seen through a
// recording testing.TB).
func TestStartBadConfig(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		simtest.Start(rec, sim.Config{Slots: -1})
	}()
	<-done
	if !strings.Contains(rec.msg, "slots -1") {
		t.Errorf("Fatalf message %q, want it to name the bad slots", rec.msg)
	}
}

type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

// Fatalf records the message and ends the goroutine, as testing's does.
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
