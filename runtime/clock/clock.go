// Package clock is the harness's time source, injected so that tests control time, and
// timeouts on it.
package clock

import (
	"context"
	"errors"
	"time"
)

// Clock is the time source, injected so that tests control time.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
	// AfterFunc calls f in its own goroutine once d has passed; stop cancels it (and reports
	// whether it did so before f was called).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now().UTC() }

func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (RealClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// errTimedOut is the cause of a context cancelled by WithTimeout.
var errTimedOut = errors.New("timed out")

// WithTimeout is context.WithTimeout on the injected clock: when d passes, ctx is cancelled
// with cause errTimedOut.
func WithTimeout(ctx context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := c.AfterFunc(d, func() { cancel(errTimedOut) })
	return ctx, func() { stop(); cancel(nil) }
}

// TimedOut reports whether ctx was cancelled by WithTimeout.
func TimedOut(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errTimedOut) }
