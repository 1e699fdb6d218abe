//go:build !invariants

package statefmt

// checkInvariants: see invariants_on.go.
const checkInvariants = false
