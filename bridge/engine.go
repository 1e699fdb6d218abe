// Package bridge is the Go side of the Eternal Engine: one Engine interface with three
// backends, the checkpoint chain built on it, and its invariants. The store (package store)
// keeps chains on disk; this package knows nothing of disks.
//
// Backends, selected by build tags and by what can be loaded:
//   - cgo (file cgo.go, build tag cgo): libeternal.a linked statically. The default, and the
//     only way to a single static binary.
//   - purego (file purego.go, built when cgo is off, or with -tags eternal_purego): loads
//     libeternal.so at run time. A binary built this way is dynamically linked.
//   - fallback (file fallback.go, always built): pure Go. It applies every backend's deltas and
//     hashes identically, but its encoder writes literal-only deltas, so chains written through it
//     are keyframe-only.
//
// Every backend passes one conformance suite (conformance_test.go), and a differential test checks
// that each applies every other's deltas to identical bytes.
package bridge

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"unsafe"
)

// ABIVersion is the engine ABI this package speaks. A library reporting another version is
// refused at load.
const ABIVersion uint32 = 2

// DefaultMaxTarget is the largest target ApplyDelta accepts unless told otherwise (1 GiB): a
// forged length can never make the engine allocate more.
const DefaultMaxTarget = 1 << 30

// Backend names which implementation an Engine uses. The strings are stable: `harness-edge
// version` prints them and scripts match on them.
type Backend string

const (
	BackendCgo      Backend = "cgo"
	BackendPurego   Backend = "purego"
	BackendFallback Backend = "fallback"
)

// Engine is the Eternal Engine as the rest of harness-edge sees it.
type Engine interface {
	// Backend says which implementation this is.
	Backend() Backend
	// ABIVersion is the loaded engine's ABI version (always ABIVersion once loaded).
	ABIVersion() uint32
	// NewEncoder returns a delta encoder with its own reusable scratch. Close it when done.
	NewEncoder() (Encoder, error)
	// ApplyDelta rebuilds a target from base and delta and appends it to dst, returning the
	// extended slice (like append; pass nil for a new slice, or a reused buffer's [:0] to avoid
	// allocating). It refuses malformed deltas, deltas made for another base length, and targets
	// over maxTarget bytes; the delta is validated in full before any memory is reserved for it.
	// On error dst is returned unchanged in length.
	ApplyDelta(dst, base, delta []byte, maxTarget int) ([]byte, error)
	// Hash64 is XXH64 (seed 0) of data, identical in every backend.
	Hash64(data []byte) uint64
	// NewChain returns an empty checkpoint chain. Close it when done.
	NewChain(policy ChainPolicy) (Chain, error)
	// LiveBuffers counts engine-owned buffers not yet freed (always 0 for the fallback). Tests
	// compare it before and after a workload.
	LiveBuffers() uint64
}

// Encoder encodes deltas. It is safe for use by one goroutine at a time; concurrent calls are
// serialised.
type Encoder interface {
	// Encode returns a delta that rebuilds target from base. The result is Go memory.
	Encode(base, target []byte) ([]byte, error)
	// Close releases the encoder's scratch. Encode after Close returns ErrClosed.
	Close() error
}

// ErrClosed is returned by an Encoder used after Close.
var ErrClosed = errors.New("eternal: encoder is closed")

// Status is an engine status code. Values mirror EternalStatus in eternal/include/eternal.h and
// are permanent: a retired value stays reserved and is never reused.
type Status uint32

const (
	StatusOK            Status = 0
	StatusNullParameter Status = 1
	StatusInvalidDelta  Status = 2
	StatusBaseMismatch  Status = 3
	StatusTooLarge      Status = 4
	StatusPanic         Status = 5
	StatusInvalidRecord Status = 6
)

var statusNames = map[Status]string{
	StatusOK:            "ok",
	StatusNullParameter: "null parameter",
	StatusInvalidDelta:  "invalid delta",
	StatusBaseMismatch:  "base mismatch",
	StatusTooLarge:      "too large",
	StatusPanic:         "engine panic",
	StatusInvalidRecord: "invalid record",
}

// String is stable: logs and tests match on it.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("status %d", uint32(s))
}

// Error makes a Status usable as a sentinel: errors.Is(err, bridge.StatusInvalidDelta).
func (s Status) Error() string { return "eternal: " + s.String() }

// EngineError is a failed engine call: the status, the engine's message and the backend.
type EngineError struct {
	Status  Status
	Message string
	Backend Backend
}

func (e *EngineError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("eternal (%s): %s", e.Backend, e.Status)
	}
	return fmt.Sprintf("eternal (%s): %s", e.Backend, e.Message)
}

// Unwrap lets errors.Is match the Status sentinel.
func (e *EngineError) Unwrap() error { return e.Status }

// Warning is something an operator should know about the engine, such as a fallback.
type Warning struct {
	Code    string // stable code, e.g. "engine_unavailable"
	Message string
}

// WarnEngineUnavailable is the code of the warning Load returns when it had to use the fallback.
const WarnEngineUnavailable = "engine_unavailable"

// Load returns the best engine this build can load: cgo when linked in, else purego when a
// library is found (HARNESS_EDGE_ENGINE_LIB, next to the executable, or the system search path),
// else the fallback together with an engine_unavailable warning saying what was tried.
func Load() (Engine, []Warning) {
	engines, errs := Available()
	if best := engines[0]; best.Backend() != BackendFallback {
		return best, nil
	}
	msg := "no Eternal Engine could be loaded; using the Go fallback (keyframe-only chains, larger store)"
	for _, err := range errs {
		msg += "; " + err.Error()
	}
	return Fallback(), []Warning{{Code: WarnEngineUnavailable, Message: msg}}
}

// Arch is the target architecture of this binary, as `harness-edge version` reports it.
func Arch() string { return runtime.GOOS + "/" + runtime.GOARCH }

// Available returns every engine this build can load, best first (cgo, purego, fallback), and
// why the others could not be loaded. The conformance suite, the differential fuzzers and
// `harness-edge doctor` run over this list.
func Available() ([]Engine, []error) {
	var engines []Engine
	var errs []error
	if e, err := OpenCgo(); err == nil {
		engines = append(engines, e)
	} else {
		errs = append(errs, err)
	}
	if e, err := OpenPurego(""); err == nil {
		engines = append(engines, e)
	} else {
		errs = append(errs, err)
	}
	return append(engines, Fallback()), errs
}

// extend grows dst by n bytes for a target to be written into, returning the whole slice and the
// n-byte tail to write. The tail never overlaps any of avoid (a caller may hand in a buffer that
// shares memory with the base); when it would, a fresh buffer is used.
func extend(dst []byte, n int, avoid ...[]byte) (whole, tail []byte) {
	whole = slices.Grow(dst, n)[:len(dst)+n]
	tail = whole[len(dst):]
	for _, a := range avoid {
		if overlaps(tail, a) {
			whole = append(make([]byte, 0, len(dst)+n), dst...)[:len(dst)+n]
			return whole, whole[len(dst):]
		}
	}
	return whole, tail
}

func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}
