package control_test

import (
	"errors"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
)

// An age is read exactly, up to a hundred years in any unit; beyond, or malformed, it is
// refused: an age that wrapped around to a negative duration would prune every harness.
func TestAnAgeIsReadOrRefusedNeverWrappedAround(t *testing.T) {
	const day = 24 * time.Hour
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"0s", 0}, {"36h", 36 * time.Hour}, {" 30d ", 30 * day}, {"2w", 14 * day},
		{"36500d", 36500 * day}, {"5214w", 5214 * 7 * day}, {"2562047h", 2562047 * time.Hour},
	} {
		if got, err := control.ParseAge(c.in); err != nil || got != c.want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "abc", "-1h", "-1d", "30x", "1.5d", "36501d", "5215w", "15251w", "20000w", "36500w",
		"99999999999999999999d", "99999999999h"} {
		if got, err := control.ParseAge(in); !errors.Is(err, control.ErrBadInput) {
			t.Errorf("ParseAge(%q) = %v, %v; want it refused", in, got, err)
		}
	}
}
