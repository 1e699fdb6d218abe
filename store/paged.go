package store

import (
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
	b := make([]byte, 0, n)
	_ = prefault(b[:n])
	return b
}

// prefault maps in the pages of b's whole aligned blocks. The error is the kernel's refusal
// (an older kernel's EINVAL), harmless to every caller but the test.
func prefault(b []byte) error {
	if len(b) < prefaultMin {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (p + prefaultAlign - 1) &^ (prefaultAlign - 1)
	end := (p + uintptr(len(b))) &^ (prefaultAlign - 1)
	if end <= start {
		return nil
	}
	return syscall.Madvise(unsafe.Slice((*byte)(unsafe.Pointer(start)), end-start), madvPopulateWrite)
}
