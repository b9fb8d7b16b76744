// Package syncbuf is a bytes.Buffer safe for concurrent use, for tests that
// read a command's output while it runs, and wait for a line to appear.
package syncbuf

import (
	"bytes"
	"context"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use. The zero value is
// ready to use.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed on the next Write; nil until a waiter needs it
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Next blocks until the next Write or until ctx ends: a test re-checks a
// condition at each line a running command logs.
func (b *Buffer) Next(ctx context.Context) error {
	b.mu.Lock()
	ch := b.nextWrite()
	b.mu.Unlock()
	return wait(ctx, ch)
}

// WaitFor blocks until the buffer holds substr or ctx ends, checking again
// at each Write: a test waits for a command's line instead of polling.
func (b *Buffer) WaitFor(ctx context.Context, substr string) error {
	for {
		b.mu.Lock()
		if strings.Contains(b.b.String(), substr) {
			b.mu.Unlock()
			return nil
		}
		ch := b.nextWrite()
		b.mu.Unlock()
		if err := wait(ctx, ch); err != nil {
			return err
		}
	}
}

// nextWrite is closed at the next Write; b.mu is held.
func (b *Buffer) nextWrite() chan struct{} {
	if b.written == nil {
		b.written = make(chan struct{})
	}
	return b.written
}

func wait(ctx context.Context, ch chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
