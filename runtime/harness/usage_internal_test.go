package harness

import (
	"os"
	"testing"
)

// The resident memory a step reports is read again at every call from the one open
// /proc/self/statm, and follows the process's memory as it grows.
func TestResidentMemoryIsReadAfreshFromTheOpenStatm(t *testing.T) {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		t.Skip("no /proc here: resident memory is reported as 0")
	}
	before := rssBytes()
	if before <= 0 {
		t.Fatalf("resident memory %d", before)
	}
	grown := make([]byte, 64<<20)
	for i := range grown {
		grown[i] = byte(i)
	}
	after := rssBytes()
	if after < before+32<<20 {
		t.Fatalf("resident memory %d before touching 64 MiB, %d after", before, after)
	}
	_ = grown[len(grown)-1]
}
