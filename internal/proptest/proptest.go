// Package proptest sets up gopter properties the same way in every package: a fixed seed and a
// floor of cases.
package proptest

import (
	"testing"

	"github.com/leanovate/gopter"
)

// Props returns gopter properties with a fixed seed and at least cases cases (half under
// -short, never fewer than 100).
func Props(t *testing.T, cases int) *gopter.Properties {
	p := gopter.DefaultTestParametersWithSeed(20261121)
	p.MinSuccessfulTests = cases
	if testing.Short() {
		p.MinSuccessfulTests = max(cases/2, 100)
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
