//go:build invariants

package statefmt

// checkInvariants turns on checks too costly for production: EncodeChanged compares every
// plan step it was told had not changed.
const checkInvariants = true
