package sim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Running is a simulator serving HTTP on a listener.
type Running struct {
	*Server
	// URL is the base URL, e.g. http://127.0.0.1:41234 (no trailing slash;
	// the API is under URL + "/v1").
	URL string
	// Addr is the address listened on.
	Addr string

	hs        *http.Server
	done      chan error
	closeOnce sync.Once
	closeErr  error
}

// Start creates a Server for cfg and serves it on addr ("" means
// 127.0.0.1:0, a free loopback port). Close it when done.
func Start(cfg Config, addr string) (*Running, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.Close()
		return nil, err
	}
	return Serve(s, ln), nil
}

// Serve serves s on ln: a TCP listener, or in-memory connections
// (internal/pipenet) for a test on a synctest bubble's fake clock.
func Serve(s *Server, ln net.Listener) *Running {
	r := &Running{Server: s, Addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(),
		hs:   &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second},
		done: make(chan error, 1)}
	go func() {
		err := r.hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		r.done <- err
	}()
	return r
}

// Close stops serving: it ends every request in flight (a hanging one
// included), closes the listener and connections, and waits for the handlers
// and the engine to return.
func (r *Running) Close() error {
	r.closeOnce.Do(func() {
		r.Server.beginClose()
		err := r.hs.Close()
		if werr := r.Server.waitClosed(); werr != nil {
			err = werr
		}
		if serr := <-r.done; err == nil {
			err = serr
		}
		r.closeErr = err
	})
	return r.closeErr
}

// Shutdown stops accepting connections and waits, until ctx is done, for
// requests in flight to finish on their own; then it closes like Close.
func (r *Running) Shutdown(ctx context.Context) error {
	serr := r.hs.Shutdown(ctx)
	err := r.Close()
	if serr != nil {
		return serr
	}
	return err
}
