package loadgen

import (
	"context"
	"time"
)

// DeadlineKeeper is a Client that ends each request at its context's
// Deadline by itself (the lean HTTP client sets it on the connection), so
// the context's Done need not close then. The runner then gives each
// request a deadline without a timer of its own: context.WithTimeout
// costs each of thousands of streams in flight a timer, a done channel and
// an entry in the run's map of children, a visible share of a waiting
// stream's heap (BenchmarkIdleStreamMemory). A Client whose KeepsDeadline
// is false gets context.WithTimeout.
type DeadlineKeeper interface {
	KeepsDeadline() bool
}

// deadlineContext is a request's context for a DeadlineKeeper: the run's
// cancellation (Done, Value and Err are its parent's) and a deadline that
// Err reports once passed, though Done does not close for it.
type deadlineContext struct {
	context.Context
	deadline time.Time
}

// deadlineKey finds a deadlineContext's deadline through the contexts
// derived from it (SoftDeadline).
type deadlineKey struct{}

func (c *deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *deadlineContext) Value(key any) any {
	if key == (deadlineKey{}) {
		return c // a pointer: no time.Time boxed on every request
	}
	return c.Context.Value(key)
}

// WithSoftDeadline returns parent with a deadline whose passing Err
// reports but Done does not: only for a Client that keeps deadlines itself
// (DeadlineKeeper). Code that needs Done to close at the deadline (a
// fallback to net/http) makes it so with HardDeadline.
func WithSoftDeadline(parent context.Context, deadline time.Time) context.Context {
	return &deadlineContext{Context: parent, deadline: deadline}
}

// SoftDeadline is the soft deadline of ctx or of a context it derives
// from (WithSoftDeadline): one that a client must keep itself.
func SoftDeadline(ctx context.Context) (time.Time, bool) {
	if c, ok := ctx.Value(deadlineKey{}).(*deadlineContext); ok {
		return c.deadline, true
	}
	return time.Time{}, false
}

// HardDeadline returns ctx with a Done that closes at the deadline, when
// ctx (or a context it derives from) has a soft one (WithSoftDeadline);
// otherwise ctx itself and a no-op. The caller calls cancel when done.
func HardDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := SoftDeadline(ctx)
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, d)
}
