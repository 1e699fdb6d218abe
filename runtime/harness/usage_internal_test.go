package harness

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// A reading of the resident memory is made afresh at every readRSS from the one open
// /proc/self/statm, and follows the process's memory as it grows. The 64 MiB come from the
// kernel (an anonymous mapping), not the Go heap, which may hold that much freed memory from
// earlier tests and hand it out again without the process growing.
func TestResidentMemoryIsReadAfreshFromTheOpenStatm(t *testing.T) {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		t.Skip("no /proc here: resident memory is reported as 0")
	}
	before := readRSS()
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
	if after := readRSS(); after < before+32<<20 {
		t.Fatalf("resident memory %d before touching 64 MiB, %d after", before, after)
	}
}

// A reading of the resident memory serves the steps that end within rssFresh of it, and the
// first step after that reads again; a clock that went back reads again too.
func TestAResidentMemoryReadingServesOnlyWhileFresh(t *testing.T) {
	var r rssReading
	reads := 0
	read := func() int64 { reads++; return int64(reads) << 20 }
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		at    time.Duration
		want  int64
		reads int
	}{
		{0, 1 << 20, 1},
		{rssFresh - time.Nanosecond, 1 << 20, 1},
		{rssFresh, 2 << 20, 2},
		{rssFresh + time.Millisecond, 2 << 20, 2},
		{time.Millisecond, 3 << 20, 3}, // earlier than the reading: the clock went back
		{time.Hour, 4 << 20, 4},
	} {
		if got := r.get(t0.Add(c.at), read); got != c.want || reads != c.reads {
			t.Fatalf("at +%v: %d after %d reads, want %d after %d", c.at, got, reads, c.want, c.reads)
		}
	}
}
