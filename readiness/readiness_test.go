package readiness

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/sim"
)

// A restart as the client sees it: nothing listens for 600 ms (connect
// errors), then the server answers 503 for 600 ms (loading), then it
// serves. Time to ready is the whole 1.2 s and more, never less; every
// failure is counted by kind, and the timeline has the three phases.
func TestWaitThroughARestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: "http://" + addr}, Model: "m", MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Result, 1)
	go func() {
		r, _ := Wait(context.Background(), Config{Client: c, Interval: 100 * time.Millisecond, AttemptTimeout: 2 * time.Second, Timeout: 20 * time.Second})
		done <- r
	}()
	// The outage's phases are what is timed: 600 ms with nothing
	// listening, then 600 ms of 503s (the sleeps are the behaviour).
	time.Sleep(600 * time.Millisecond)
	cfg := sim.DefaultConfig()
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP503, Rate: 1}}
	srv, err := sim.Start(cfg, addr)
	if err != nil {
		t.Fatalf("start the simulator on %s: %v", addr, err)
	}
	defer srv.Close()
	time.Sleep(600 * time.Millisecond) // the 503 phase
	if err := srv.SetFaults(nil); err != nil {
		t.Fatal(err)
	}
	var r *Result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("no result")
	}
	t.Logf("%+v", *r)
	if !r.Ready || r.TimeToReadyS == nil || *r.TimeToReadyS < 1.2 || *r.TimeToReadyS > 5 {
		t.Fatalf("ready %v after %v s, want 1.2 to 5", r.Ready, r.TimeToReadyS)
	}
	if r.ErrorsByKind["connect"] < 1 || r.ErrorsByKind["server_error"] < 1 || r.Errors != r.Attempts-1 {
		t.Errorf("errors %v of %d attempts", r.ErrorsByKind, r.Attempts)
	}
	var kinds []string
	for _, e := range r.Timeline {
		kinds = append(kinds, e.Kind)
	}
	if len(kinds) != 3 || kinds[0] != "connect" || kinds[1] != "server_error" || kinds[2] != "ok" {
		t.Errorf("timeline %v, want connect, server_error, ok", kinds)
	}
}

// Never ready: a result at the timeout, Ready false, no error.
func TestWaitTimesOut(t *testing.T) {
	c, _ := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: "http://127.0.0.1:1"}, Model: "m"})
	t0 := time.Now()
	r, err := Wait(context.Background(), Config{Client: c, Interval: 50 * time.Millisecond, Timeout: 300 * time.Millisecond})
	if err != nil || r.Ready || r.Attempts < 2 || r.Note == "" {
		t.Fatalf("%v %+v", err, r)
	}
	if el := time.Since(t0); el > 2*time.Second {
		t.Errorf("timed out after %s", el)
	}
}
