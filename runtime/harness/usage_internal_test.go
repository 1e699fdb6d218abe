package harness

import (
	"os"
	"syscall"
	"testing"
)

// The resident memory a step reports is read again at every call from the one open
// /proc/self/statm, and follows the process's memory as it grows. The 64 MiB come from the
// kernel (an anonymous mapping), not the Go heap, which may hold that much freed memory from
// earlier tests and hand it out again without the process growing.
func TestResidentMemoryIsReadAfreshFromTheOpenStatm(t *testing.T) {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		t.Skip("no /proc here: resident memory is reported as 0")
	}
	before := rssBytes()
	if before <= 0 {
		t.Fatalf("resident memory %d", before)
	}
	grown, err := syscall.Mmap(-1, 0, 64<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(grown)
	for i := 0; i < len(grown); i += os.Getpagesize() {
		grown[i] = 1
	}
	if after := rssBytes(); after < before+32<<20 {
		t.Fatalf("resident memory %d before touching 64 MiB, %d after", before, after)
	}
}
