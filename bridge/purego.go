//go:build !cgo || eternal_purego

package bridge

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// EnvEngineLib names the environment variable that points the purego backend at libeternal.so.
const EnvEngineLib = "HARNESS_EDGE_ENGINE_LIB"

// puregoSymbols are every export the purego backend calls; all are resolved at open.
var puregoSymbols = []string{
	"eternal_abi_version",
	"eternal_live_buffers",
	"eternal_buffer_free",
	"eternal_encoder_new",
	"eternal_encoder_free",
	"eternal_delta_encode",
	"eternal_delta_check",
	"eternal_delta_apply",
	"eternal_hash64",
	"eternal_chain_new",
	"eternal_chain_free",
	"eternal_chain_append",
	"eternal_chain_push",
	"eternal_chain_head",
	"eternal_chain_state",
}

type puregoEngine struct {
	path string
	fn   map[string]uintptr
}

var (
	puregoMu     sync.Mutex
	puregoLoaded = map[string]*puregoEngine{}
)

// LibraryCandidates lists where OpenPurego looks for libeternal.so when given no path. When
// HARNESS_EDGE_ENGINE_LIB is set it is the only candidate: a library the user named is never
// silently replaced by another one. Otherwise: next to the executable, ../lib beside it, then
// the dynamic loader's own search path.
func LibraryCandidates() []string {
	if p := os.Getenv(EnvEngineLib); p != "" {
		return []string{p}
	}
	var c []string
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		c = append(c, filepath.Join(dir, "libeternal.so"), filepath.Join(dir, "..", "lib", "libeternal.so"))
	}
	return append(c, "libeternal.so")
}

// OpenPurego loads libeternal.so from path (or, when path is empty, the first of
// LibraryCandidates that loads), resolves every symbol and checks the ABI version.
func OpenPurego(path string) (Engine, error) {
	if path != "" {
		e, err := openPuregoAt(path)
		if err != nil {
			return nil, fmt.Errorf("purego backend: %w", err)
		}
		return e, nil
	}
	var tried []string
	for _, p := range LibraryCandidates() {
		if strings.Contains(p, "/") {
			if _, err := os.Stat(p); err != nil {
				tried = append(tried, p+": not found")
				continue
			}
		}
		e, err := openPuregoAt(p)
		if err == nil {
			return e, nil
		}
		tried = append(tried, err.Error())
	}
	return nil, fmt.Errorf("purego backend: no usable libeternal.so (%s)", strings.Join(tried, "; "))
}

func openPuregoAt(path string) (Engine, error) {
	puregoMu.Lock()
	defer puregoMu.Unlock()
	if e, ok := puregoLoaded[path]; ok {
		return e, nil
	}
	lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("cannot load %s: %w", path, err)
	}
	e := &puregoEngine{path: path, fn: map[string]uintptr{}}
	var missing []string
	for _, name := range puregoSymbols {
		sym, err := purego.Dlsym(lib, name)
		if err != nil || sym == 0 {
			missing = append(missing, name)
			continue
		}
		e.fn[name] = sym
	}
	if len(missing) > 0 {
		_ = purego.Dlclose(lib)
		return nil, fmt.Errorf("%s lacks %d symbol(s): %s", path, len(missing), strings.Join(missing, ", "))
	}
	if v := e.ABIVersion(); v != ABIVersion {
		_ = purego.Dlclose(lib)
		return nil, fmt.Errorf("%s has ABI version %d, this build needs %d", path, v, ABIVersion)
	}
	// The library stays loaded for the life of the process: encoders and cleanups may refer to it.
	puregoLoaded[path] = e
	return e, nil
}

func (e *puregoEngine) call(name string, args ...uintptr) uintptr {
	r1, _, _ := purego.SyscallN(e.fn[name], args...)
	return r1
}

func (e *puregoEngine) Backend() Backend { return BackendPurego }

// Path is the library this engine was loaded from.
func (e *puregoEngine) Path() string { return e.path }

func (e *puregoEngine) ABIVersion() uint32 { return uint32(e.call("eternal_abi_version")) }

func (e *puregoEngine) LiveBuffers() uint64 { return uint64(e.call("eternal_live_buffers")) }

func (e *puregoEngine) free(p unsafe.Pointer, n int) {
	purego.SyscallN(e.fn["eternal_buffer_free"], uintptr(p), uintptr(n))
}

// pinned pins the Go memory passed to the engine for one call: the backing arrays of input
// slices (nil and empty travel as (NULL, 0)) and the out-parameters. Out-parameters live in a
// heap-allocated, pinned outs value: a uintptr to a stack variable would not survive a stack move.
type pinned struct {
	p runtime.Pinner
	o *outs
}

type outs struct {
	buf    unsafe.Pointer
	bufLen uintptr
	msg    unsafe.Pointer
	msgLen uintptr
	word   uint64
}

// out returns the call's pinned out-parameters.
func (pn *pinned) out() *outs {
	if pn.o == nil {
		pn.o = new(outs)
		pn.p.Pin(pn.o)
	}
	return pn.o
}

func (o *outs) bufArgs() (uintptr, uintptr) {
	return uintptr(unsafe.Pointer(&o.buf)), uintptr(unsafe.Pointer(&o.bufLen))
}

func (o *outs) msgArgs() (uintptr, uintptr) {
	return uintptr(unsafe.Pointer(&o.msg)), uintptr(unsafe.Pointer(&o.msgLen))
}

func (pn *pinned) bytes(b []byte) (uintptr, uintptr) {
	if len(b) == 0 {
		return 0, 0
	}
	d := unsafe.SliceData(b)
	pn.p.Pin(d)
	return uintptr(unsafe.Pointer(d)), uintptr(len(b))
}

func (e *puregoEngine) err(st Status, msg unsafe.Pointer, n uintptr) error {
	return &EngineError{Status: st, Backend: BackendPurego, Message: string(copyAndFree(msg, int(n), e.free))}
}

func (e *puregoEngine) Hash64(data []byte) uint64 {
	var pn pinned
	defer pn.p.Unpin()
	p, n := pn.bytes(data)
	o := pn.out()
	st := Status(uint32(e.call("eternal_hash64", p, n, uintptr(unsafe.Pointer(&o.word)))))
	if st != StatusOK {
		panic(fmt.Sprintf("eternal (purego): hash64 returned %s with valid arguments (engine bug)", st))
	}
	return o.word
}

func (e *puregoEngine) ApplyDelta(dst, base, delta []byte, maxTarget int) ([]byte, error) {
	maxTarget = max(maxTarget, 0)
	var pn pinned
	defer pn.p.Unpin()
	bp, bn := pn.bytes(base)
	dp, dn := pn.bytes(delta)
	o := pn.out()
	om, omn := o.msgArgs()
	st := Status(uint32(e.call("eternal_delta_check", bn, dp, dn, uintptr(maxTarget), uintptr(unsafe.Pointer(&o.word)), om, omn)))
	if st != StatusOK {
		return dst, e.err(st, o.msg, o.msgLen)
	}
	whole, tail := extend(dst, int(o.word), base, delta)
	tp, tn := pn.bytes(tail)
	st = Status(uint32(e.call("eternal_delta_apply", bp, bn, dp, dn, tp, tn, uintptr(unsafe.Pointer(&o.bufLen)), om, omn)))
	if st != StatusOK {
		return dst, e.err(st, o.msg, o.msgLen)
	}
	return whole, nil
}

type puregoEncoder struct {
	mu      sync.Mutex
	e       *puregoEngine
	enc     uintptr
	cleanup runtime.Cleanup // frees enc if the encoder is collected unclosed; stopped by Close
}

func (e *puregoEngine) NewEncoder() (Encoder, error) {
	var pn pinned
	defer pn.p.Unpin()
	o := pn.out()
	st := Status(uint32(e.call("eternal_encoder_new", uintptr(unsafe.Pointer(&o.buf)))))
	if st != StatusOK || o.buf == nil {
		return nil, &EngineError{Status: st, Backend: BackendPurego, Message: "eternal_encoder_new failed"}
	}
	h := uintptr(o.buf)
	enc := &puregoEncoder{e: e, enc: h}
	enc.cleanup = runtime.AddCleanup(enc, func(h uintptr) { e.call("eternal_encoder_free", h) }, h)
	return enc, nil
}

func (x *puregoEncoder) Encode(base, target []byte) ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.enc == 0 {
		return nil, ErrClosed
	}
	var pn pinned
	defer pn.p.Unpin()
	bp, bn := pn.bytes(base)
	tp, tn := pn.bytes(target)
	o := pn.out()
	ob, obn := o.bufArgs()
	om, omn := o.msgArgs()
	st := Status(uint32(x.e.call("eternal_delta_encode", x.enc, bp, bn, tp, tn, ob, obn, om, omn)))
	if st != StatusOK {
		return nil, x.e.err(st, o.msg, o.msgLen)
	}
	return copyAndFree(o.buf, int(o.bufLen), x.e.free), nil
}

func (x *puregoEncoder) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.enc != 0 {
		x.cleanup.Stop()
		x.e.call("eternal_encoder_free", x.enc)
		x.enc = 0
	}
	return nil
}

type puregoChain struct {
	mu      sync.Mutex
	e       *puregoEngine
	c       uintptr
	cleanup runtime.Cleanup
}

func (e *puregoEngine) NewChain(p ChainPolicy) (Chain, error) {
	var pn pinned
	defer pn.p.Unpin()
	o := pn.out()
	st := Status(uint32(e.call("eternal_chain_new", uintptr(p.MaxReplay), uintptr(p.MaxDeltaPct), uintptr(unsafe.Pointer(&o.buf)))))
	if st != StatusOK || o.buf == nil {
		return nil, &EngineError{Status: st, Backend: BackendPurego, Message: "eternal_chain_new failed"}
	}
	h := uintptr(o.buf)
	c := &puregoChain{e: e, c: h}
	c.cleanup = runtime.AddCleanup(c, func(h uintptr) { e.call("eternal_chain_free", h) }, h)
	return c, nil
}

func (c *puregoChain) Append(state []byte, prefixHint, insertHint int) (RecordInfo, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == 0 {
		return RecordInfo{}, nil, ErrClosed
	}
	var pn pinned
	defer pn.p.Unpin()
	sp, sn := pn.bytes(state)
	info := new(RecordInfo)
	pn.p.Pin(info)
	o := pn.out()
	ob, obn := o.bufArgs()
	om, omn := o.msgArgs()
	st := Status(uint32(c.e.call("eternal_chain_append", c.c, sp, sn, uintptr(max(prefixHint, 0)), uintptr(max(insertHint, 0)), uintptr(unsafe.Pointer(info)), ob, obn, om, omn)))
	if st != StatusOK {
		return RecordInfo{}, nil, c.e.err(st, o.msg, o.msgLen)
	}
	return *info, copyAndFree(o.buf, int(o.bufLen), c.e.free), nil
}

func (c *puregoChain) Push(info RecordInfo, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == 0 {
		return ErrClosed
	}
	var pn pinned
	defer pn.p.Unpin()
	pp, pl := pn.bytes(payload)
	ip := new(RecordInfo)
	*ip = info
	pn.p.Pin(ip)
	o := pn.out()
	om, omn := o.msgArgs()
	st := Status(uint32(c.e.call("eternal_chain_push", c.c, uintptr(unsafe.Pointer(ip)), pp, pl, om, omn)))
	if st != StatusOK {
		return c.e.err(st, o.msg, o.msgLen)
	}
	return nil
}

func (c *puregoChain) head() RecordInfo {
	var pn pinned
	defer pn.p.Unpin()
	info := new(RecordInfo)
	pn.p.Pin(info)
	if c.c != 0 {
		c.e.call("eternal_chain_head", c.c, uintptr(unsafe.Pointer(info)))
	}
	return *info
}

func (c *puregoChain) Head() RecordInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.head()
}

func (c *puregoChain) State(dst []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == 0 {
		return dst
	}
	whole, tail := extend(dst, int(c.head().StateLen))
	var pn pinned
	defer pn.p.Unpin()
	tp, tn := pn.bytes(tail)
	o := pn.out()
	if st := Status(uint32(c.e.call("eternal_chain_state", c.c, tp, tn, uintptr(unsafe.Pointer(&o.bufLen))))); st != StatusOK {
		panic(fmt.Sprintf("eternal (purego): chain_state returned %s for a buffer of the head's size (engine bug)", st))
	}
	return whole
}

func (c *puregoChain) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != 0 {
		c.cleanup.Stop()
		c.e.call("eternal_chain_free", c.c)
		c.c = 0
	}
	return nil
}
