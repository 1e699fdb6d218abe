package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Clock is the runtime's time source, injected so that tests control time.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
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

// NewID makes harness ids: "h-" + UTC date and time + 6 random hex digits, which sort by
// creation time and do not collide in practice.
func NewID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "h-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}
