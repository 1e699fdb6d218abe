//go:build !cgo

package bridge

import "errors"

// OpenCgo reports that this binary was built without cgo, so the static engine is not linked in.
func OpenCgo() (Engine, error) {
	return nil, errors.New("cgo backend: not in this build (built with CGO_ENABLED=0)")
}

// TrimNativeHeap does nothing without cgo: no engine is linked in, and the process's own memory
// is Go's.
func TrimNativeHeap() {}
