package bridge

import "unsafe"

// copyAndFree copies an engine-owned buffer into Go memory and releases it at once through the
// engine's own free function (never C.free). Every engine buffer passes through here exactly
// once; with -tags invariants, a pointer received twice or freed twice panics.
func copyAndFree(p unsafe.Pointer, n int, free func(unsafe.Pointer, int)) []byte {
	if p == nil {
		return nil
	}
	ownedTrack(uintptr(p))
	out := make([]byte, n)
	copy(out, unsafe.Slice((*byte)(p), n))
	ownedRelease(uintptr(p))
	free(p, n)
	return out
}
