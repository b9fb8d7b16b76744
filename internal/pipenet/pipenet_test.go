package pipenet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// An HTTP exchange over the pipes runs on the bubble's fake clock: the
// handler's second of sleep takes exactly a second.
func TestHTTPInBubble(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ln := Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Second)
			io.WriteString(w, "ok")
		})}
		go srv.Serve(ln)
		tr := &http.Transport{DialContext: ln.Dial}
		defer func() { srv.Close(); tr.CloseIdleConnections() }()
		start := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get("http://anywhere/x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "ok" || time.Since(start) != time.Second {
			t.Errorf("body %q after %v, want ok after exactly 1s", body, time.Since(start))
		}
	})
}

func TestDialAfterClose(t *testing.T) {
	t.Parallel()
	ln := Listen()
	ln.Close()
	if _, err := ln.Dial(context.Background(), "tcp", "x:1"); !errors.Is(err, net.ErrClosed) {
		t.Errorf("dial after close: %v, want net.ErrClosed", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("accept after close: %v, want net.ErrClosed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Listen().Dial(ctx, "tcp", "x:1"); !errors.Is(err, context.Canceled) {
		t.Errorf("dial with a cancelled context: %v", err)
	}
}
