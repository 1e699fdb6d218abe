//go:build cgo && !eternal_purego

package bridge

import "errors"

// OpenPurego reports that this cgo build links the engine statically and leaves the purego
// loader out (a static binary cannot dlopen). Build with -tags eternal_purego to include it.
func OpenPurego(string) (Engine, error) {
	return nil, errors.New("purego backend: not in this build (cgo builds link the engine statically; add -tags eternal_purego)")
}
