// Package proptest sets up gopter properties the same way in every package: a fixed seed and a
// floor of cases.
package proptest

import (
	"testing"

	"github.com/leanovate/gopter"
)

// Props returns gopter properties with a fixed seed and cases cases. -short runs a quarter of
// them (at least 25): it is for the passes that repeat the full run's properties on another
// engine backend or under emulation, where what differs is below the harness.
func Props(t *testing.T, cases int) *gopter.Properties {
	p := gopter.DefaultTestParametersWithSeed(20261121)
	p.MinSuccessfulTests = cases
	if testing.Short() {
		p.MinSuccessfulTests = max(cases/4, 25)
	}
	return gopter.NewProperties(p)
}

// Report runs a property body that returns "" when it holds and what went wrong otherwise
// (logged), as the bool gopter wants.
func Report(t *testing.T, f func() string) bool {
	if msg := f(); msg != "" {
		t.Log(msg)
		return false
	}
	return true
}
