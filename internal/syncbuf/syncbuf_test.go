package syncbuf

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Writers on several goroutines lose nothing (run with -race).
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Errorf("%d bytes, want 800", len(got))
	}
}

// WaitFor returns once a later Write brings the text, and not before.
func TestWaitFor(t *testing.T) {
	var b Buffer
	b.Write([]byte("starting\n"))
	done := make(chan error, 1)
	go func() { done <- b.WaitFor(context.Background(), "ready on 127.0.0.1:80") }()
	b.Write([]byte("ready on 127.0."))
	b.Write([]byte("0.1:8"))
	select {
	case err := <-done:
		t.Fatalf("returned before the text was whole: %v", err)
	default:
	}
	b.Write([]byte("0\n"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.WaitFor(ctx, "never"); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitFor after cancel: %v", err)
	}
}

// Next returns at the next Write.
func TestNext(t *testing.T) {
	t.Parallel()
	var b Buffer
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- b.Next(ctx) }()
	for {
		b.Write([]byte("line\n")) // until the waiter has seen one
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		runtime.Gosched()
	}
}
