//go:build cgo

package bridge

/*
#cgo CFLAGS: -I${SRCDIR}/../eternal/include
#cgo linux,amd64 LDFLAGS: ${SRCDIR}/../eternal/lib/linux_amd64/libeternal.a -lm -ldl -lpthread
#cgo linux,arm64 LDFLAGS: ${SRCDIR}/../eternal/lib/linux_arm64/libeternal.a -lm -ldl -lpthread
#include <malloc.h>
#include "eternal.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

type cgoEngine struct{}

// TrimNativeHeap gives the C heap's free memory back to the system (glibc's malloc_trim). The
// engine's chains are allocated with malloc on whichever threads Go runs them on, and each such
// thread's arena keeps what was freed in it: a daemon that ran a burst of harnesses held tens
// of megabytes nobody used.
func TrimNativeHeap() { C.malloc_trim(0) }

// OpenCgo returns the statically linked engine, after checking its ABI version.
func OpenCgo() (Engine, error) {
	if v := uint32(C.eternal_abi_version()); v != ABIVersion {
		return nil, fmt.Errorf("cgo backend: linked libeternal.a has ABI version %d, this build needs %d (rebuild with `make build`)", v, ABIVersion)
	}
	return cgoEngine{}, nil
}

func (cgoEngine) Backend() Backend    { return BackendCgo }
func (cgoEngine) ABIVersion() uint32  { return uint32(C.eternal_abi_version()) }
func (cgoEngine) LiveBuffers() uint64 { return uint64(C.eternal_live_buffers()) }

// bytesArg passes a Go slice to C for the duration of one call; cgo pins it. A nil or empty
// slice is passed as (NULL, 0), which the engine reads as empty.
func bytesArg(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))
}

func cgoFree(p unsafe.Pointer, n int) { C.eternal_buffer_free((*C.uint8_t)(p), C.size_t(n)) }

func cgoError(st C.EternalStatus, msg *C.uint8_t, n C.size_t) error {
	return &EngineError{
		Status:  Status(st),
		Backend: BackendCgo,
		Message: string(copyAndFree(unsafe.Pointer(msg), int(n), cgoFree)),
	}
}

func (cgoEngine) Hash64(data []byte) uint64 {
	p, n := bytesArg(data)
	var h C.uint64_t
	if st := C.eternal_hash64(p, n, &h); st != C.ETERNAL_STATUS_OK {
		panic(fmt.Sprintf("eternal (cgo): hash64 returned %s with valid arguments (engine bug)", Status(st)))
	}
	runtime.KeepAlive(data)
	return uint64(h)
}

func (cgoEngine) ApplyDelta(dst, base, delta []byte, maxTarget int) ([]byte, error) {
	maxTarget = max(maxTarget, 0)
	bp, bn := bytesArg(base)
	dp, dn := bytesArg(delta)
	var n C.size_t
	var msg *C.uint8_t
	var msgN C.size_t
	if st := C.eternal_delta_check(bn, dp, dn, C.size_t(maxTarget), &n, &msg, &msgN); st != C.ETERNAL_STATUS_OK {
		return dst, cgoError(st, msg, msgN)
	}
	whole, tail := extend(dst, int(n), base, delta)
	tp, tn := bytesArg(tail)
	var written C.size_t
	st := C.eternal_delta_apply(bp, bn, dp, dn, tp, tn, &written, &msg, &msgN)
	runtime.KeepAlive(base)
	runtime.KeepAlive(delta)
	runtime.KeepAlive(tail)
	if st != C.ETERNAL_STATUS_OK {
		return dst, cgoError(st, msg, msgN)
	}
	return whole, nil
}

type cgoEncoder struct {
	mu      sync.Mutex
	enc     *C.eternal_encoder
	cleanup runtime.Cleanup // frees enc if the encoder is collected unclosed; stopped by Close
}

func (cgoEngine) NewEncoder() (Encoder, error) {
	var h *C.eternal_encoder
	if st := C.eternal_encoder_new(&h); st != C.ETERNAL_STATUS_OK {
		return nil, &EngineError{Status: Status(st), Backend: BackendCgo, Message: "eternal_encoder_new failed"}
	}
	e := &cgoEncoder{enc: h}
	// A forgotten Close leaks only until the encoder is collected.
	e.cleanup = runtime.AddCleanup(e, func(h *C.eternal_encoder) { C.eternal_encoder_free(h) }, h)
	return e, nil
}

func (e *cgoEncoder) Encode(base, target []byte) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.enc == nil {
		return nil, ErrClosed
	}
	bp, bn := bytesArg(base)
	tp, tn := bytesArg(target)
	var out, msg *C.uint8_t
	var outN, msgN C.size_t
	st := C.eternal_delta_encode(e.enc, bp, bn, tp, tn, &out, &outN, &msg, &msgN)
	runtime.KeepAlive(base)
	runtime.KeepAlive(target)
	if st != C.ETERNAL_STATUS_OK {
		return nil, cgoError(st, msg, msgN)
	}
	return copyAndFree(unsafe.Pointer(out), int(outN), cgoFree), nil
}

func (e *cgoEncoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.enc != nil {
		e.cleanup.Stop()
		C.eternal_encoder_free(e.enc)
		e.enc = nil
	}
	return nil
}

type cgoChain struct {
	mu      sync.Mutex
	c       *C.eternal_chain
	cleanup runtime.Cleanup
}

func (cgoEngine) NewChain(p ChainPolicy) (Chain, error) {
	var h *C.eternal_chain
	if st := C.eternal_chain_new(C.uint32_t(p.MaxReplay), C.uint32_t(p.MaxDeltaPct), &h); st != C.ETERNAL_STATUS_OK {
		return nil, &EngineError{Status: Status(st), Backend: BackendCgo, Message: "eternal_chain_new failed"}
	}
	c := &cgoChain{c: h}
	c.cleanup = runtime.AddCleanup(c, func(h *C.eternal_chain) { C.eternal_chain_free(h) }, h)
	return c, nil
}

func (c *cgoChain) Append(state []byte, prefixHint, insertHint int) (RecordInfo, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return RecordInfo{}, nil, ErrClosed
	}
	sp, sn := bytesArg(state)
	var info RecordInfo
	var out, msg *C.uint8_t
	var outN, msgN C.size_t
	st := C.eternal_chain_append(c.c, sp, sn, C.size_t(max(prefixHint, 0)), C.size_t(max(insertHint, 0)), (*C.eternal_record_info)(unsafe.Pointer(&info)), &out, &outN, &msg, &msgN)
	runtime.KeepAlive(state)
	if st != C.ETERNAL_STATUS_OK {
		return RecordInfo{}, nil, cgoError(st, msg, msgN)
	}
	return info, copyAndFree(unsafe.Pointer(out), int(outN), cgoFree), nil
}

func (c *cgoChain) Push(info RecordInfo, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return ErrClosed
	}
	pp, pn := bytesArg(payload)
	var msg *C.uint8_t
	var msgN C.size_t
	st := C.eternal_chain_push(c.c, (*C.eternal_record_info)(unsafe.Pointer(&info)), pp, pn, &msg, &msgN)
	runtime.KeepAlive(payload)
	if st != C.ETERNAL_STATUS_OK {
		return cgoError(st, msg, msgN)
	}
	return nil
}

func (c *cgoChain) Head() RecordInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var info RecordInfo
	if c.c != nil {
		C.eternal_chain_head(c.c, (*C.eternal_record_info)(unsafe.Pointer(&info)))
	}
	return info
}

func (c *cgoChain) State(dst []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return dst
	}
	var info RecordInfo
	C.eternal_chain_head(c.c, (*C.eternal_record_info)(unsafe.Pointer(&info)))
	whole, tail := extend(dst, int(info.StateLen))
	tp, tn := bytesArg(tail)
	var n C.size_t
	if st := C.eternal_chain_state(c.c, tp, tn, &n); st != C.ETERNAL_STATUS_OK {
		panic(fmt.Sprintf("eternal (cgo): chain_state returned %s for a buffer of the head's size (engine bug)", Status(st)))
	}
	runtime.KeepAlive(tail)
	return whole
}

func (c *cgoChain) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		c.cleanup.Stop()
		C.eternal_chain_free(c.c)
		c.c = nil
	}
	return nil
}
