//go:build unix

package transport

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen/sse"
)

// TestLeanPumpOneReadPerEvent: a stream read through sse.Scanner.Pump makes
// one read system call per event, where each wait of the poller would
// begin with a read that finds nothing (two per event); and its events,
// its end and the connection's reuse are those of the plain reads.
func TestLeanPumpOneReadPerEvent(t *testing.T) {
	const events = 20
	next := make(chan string)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for ev := range next {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	conns := countConns(srv)
	defer srv.Close()
	var reads, empty int
	sysRead = func(fd int, p []byte) (int, error) {
		n, err := syscall.Read(fd, p)
		reads++
		if err == syscall.EAGAIN {
			empty++
		}
		return n, err
	}
	defer func() { sysRead = syscall.Read }()

	cl := leanClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { next <- "data: 0\n\n" }() // the head comes with it
	req, _ := cl.NewRequest(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, _, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := sse.NewPooledScanner()
	sc.Reset(resp.Body)
	if !sc.Next() || string(sc.Data()) != "0" {
		t.Fatalf("first event: %q, %v", sc.Data(), sc.Err())
	}
	// Each event asks the server for the next one: it comes while the
	// reader waits, after the read that took the last.
	got := 1
	reads, empty = 0, 0
	each := func() bool {
		if want := fmt.Sprint(got); string(sc.Data()) != want {
			t.Errorf("event %q, want %q", sc.Data(), want)
		}
		got++
		if got < events {
			next <- fmt.Sprintf("data: %d\n\n", got)
		} else {
			close(next)
		}
		return true
	}
	go func() { next <- "data: 1\n\n" }()
	if sc.Pump(each) {
		t.Fatal("Pump: each stopped it")
	}
	if got != events {
		t.Fatalf("%d events through Pump, want %d", got-1, events-1)
	}
	// events-1 events and the body's end; the pump's first read may find
	// nothing (it follows the reset of the poller's readiness), as may one
	// raced by an event's bytes coming in two reads.
	if reads > events+2 || empty > 2 {
		t.Errorf("%d reads (%d found nothing) for %d events and the end: want at most %d, 2", reads, empty, events-1, events+2)
	}
	if sc.Next() || sc.Err() != nil {
		t.Fatalf("after the end: Next true or %v", sc.Err())
	}
	resp.Body.Close()
	// The connection went back to the pool, clean: the next request
	// reuses it.
	req, _ = cl.NewRequest(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	if resp, _, err = cl.Do(req); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for two requests in turn, want 1", n)
	}
}
