package store

import (
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

// resident counts the pages of b that are mapped in (mincore).
func resident(t *testing.T, b []byte) (in, all int) {
	t.Helper()
	page := syscall.Getpagesize()
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (p + uintptr(page) - 1) &^ uintptr(page-1)
	end := (p + uintptr(len(b))) &^ uintptr(page-1)
	vec := make([]byte, (end-start)/uintptr(page))
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, start, end-start, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	for _, v := range vec {
		in += int(v & 1)
	}
	return in, len(vec)
}

// populateHonoured reports whether the kernel maps pages in on MADV_POPULATE_WRITE, probed on a
// mapping of its own (not through prefault, which the test checks).
func populateHonoured(t *testing.T) bool {
	t.Helper()
	const n = 1 << 20
	m, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if syscall.Madvise(m, madvPopulateWrite) != nil {
		return false
	}
	in, all := resident(t, m)
	return in == all
}

func TestRoomMapsInANewLargeBuffer(t *testing.T) {
	if !populateHonoured(t) {
		t.Skip("MADV_POPULATE_WRITE is refused or ignored here (Linux before 5.14, or an emulator such as qemu-user): pages fault in as they are written")
	}
	const n = 8 << 20
	b := room(nil, n)
	if len(b) != 0 || cap(b) < n {
		t.Fatalf("room(nil, %d): len %d cap %d", n, len(b), cap(b))
	}
	in, all := resident(t, b[:n])
	// The aligned blocks are mapped in: all but at most two blocks' worth of pages at the ends.
	if edge := 2 * prefaultAlign / syscall.Getpagesize(); in < all-edge {
		t.Fatalf("%d of %d pages mapped in after room", in, all)
	}
}

func TestRoomReusesABufferLargeEnough(t *testing.T) {
	buf := make([]byte, 10, 100)
	b := room(buf, 100)
	if len(b) != 0 || cap(b) != 100 || &b[:1][0] != &buf[0] {
		t.Fatalf("room of a buffer with room made a new one (len %d cap %d)", len(b), cap(b))
	}
	if b := room(buf, 101); cap(b) < 101 || &b[:1][0] == &buf[0] {
		t.Fatalf("room(101) of a 100-byte buffer: cap %d, same memory %v", cap(b), &b[:1][0] == &buf[0])
	}
}

func TestUnzeroedBufferHoldsWhatIsWrittenThroughCollections(t *testing.T) {
	const n = 3 << 20
	b := unzeroed(n)
	if len(b) != 0 || cap(b) < n {
		t.Fatalf("unzeroed(%d): len %d cap %d", n, len(b), cap(b))
	}
	b = b[:n]
	for i := range b {
		b[i] = byte(i * 7)
	}
	for range 3 {
		runtime.GC()
		_ = make([]byte, n) // memory the collector may hand out again if it freed b
	}
	for i := range b {
		if b[i] != byte(i*7) {
			t.Fatalf("byte %d changed after collections: %d", i, b[i])
		}
	}
}
