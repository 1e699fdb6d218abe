//go:build invariants

package bridge

import (
	"fmt"
	"sync"
)

// With -tags invariants every engine-owned pointer is tracked from receipt to free, so a double
// free or a pointer handed out twice while live fails loudly (pebble's internal/invariants idea).
var owned = struct {
	sync.Mutex
	live map[uintptr]bool
	seen uint64
}{live: map[uintptr]bool{}}

// InvariantsOn says whether this build tracks engine buffers (-tags invariants).
const InvariantsOn = true

func ownedTrack(p uintptr) {
	owned.Lock()
	defer owned.Unlock()
	if owned.live[p] {
		panic(fmt.Sprintf("bridge invariant: engine buffer %#x received twice while live", p))
	}
	owned.live[p] = true
	owned.seen++
}

func ownedRelease(p uintptr) {
	owned.Lock()
	defer owned.Unlock()
	if !owned.live[p] {
		panic(fmt.Sprintf("bridge invariant: engine buffer %#x freed but not live (double free)", p))
	}
	delete(owned.live, p)
}

// OwnedStats reports the engine buffers the bridge has received and those not yet released
// (tests use it; it counts only with -tags invariants).
func OwnedStats() (seen uint64, live int) {
	owned.Lock()
	defer owned.Unlock()
	return owned.seen, len(owned.live)
}
