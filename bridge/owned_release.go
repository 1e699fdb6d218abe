//go:build !invariants

package bridge

// InvariantsOn says whether this build tracks engine buffers (-tags invariants).
const InvariantsOn = false

func ownedTrack(uintptr)   {}
func ownedRelease(uintptr) {}

// OwnedStats counts nothing without -tags invariants.
func OwnedStats() (seen uint64, live int) { return 0, 0 }
