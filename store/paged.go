package store

import (
	"strings"
	"syscall"
	"unsafe"
)

// madvPopulateWrite is Linux's MADV_POPULATE_WRITE (5.14 and later): map a range's pages in,
// writable, in one system call. Older kernels refuse it and the pages fault in one by one.
const madvPopulateWrite = 23

// prefaultAlign is the alignment of the range given to madvise: a multiple of every page size
// Linux uses (4, 16 and 64 KiB).
const prefaultAlign = 64 << 10

// prefaultMin is the size from which a new buffer is mapped in ahead of use.
const prefaultMin = 1 << 20

// room returns buf emptied, with room for n bytes. A buffer it has to make anew, of a megabyte
// or more, has its pages mapped in with one system call: a restore fills megabytes at once, and
// a page fault per 4 KiB costs more than the copy into it (about 14 µs each on the virtual
// machines we measure on, 2.5 ms per megabyte).
func room(buf []byte, n int) []byte {
	if cap(buf) >= n {
		return buf[:0]
	}
	if n < prefaultMin {
		return make([]byte, 0, n)
	}
	b := unzeroed(n)
	_ = prefault(b[:n])
	return b
}

// unzeroed returns an empty buffer with room for n bytes that the runtime did not zero. make
// zeroes memory it reuses, and a long-running process reuses memory the runtime has given back
// to the kernel: the zeroing would fault the pages in one by one before prefault could map them
// in at once. Every caller overwrites the bytes it uses. The memory comes from strings.Builder,
// which allocates without zeroing; its only reference is the returned slice.
func unzeroed(n int) []byte {
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte(0)
	s := sb.String()
	return unsafe.Slice(unsafe.StringData(s), n)[:0]
}

// prefault maps in the pages of b's whole aligned blocks. The error is the kernel's refusal
// (an older kernel's EINVAL), which leaves the pages to fault in as they are written.
func prefault(b []byte) error {
	if len(b) < prefaultMin {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := int((p+prefaultAlign-1)&^(prefaultAlign-1) - p)
	end := int((p+uintptr(len(b)))&^(prefaultAlign-1) - p)
	if end <= start {
		return nil
	}
	return syscall.Madvise(b[start:end], madvPopulateWrite)
}
