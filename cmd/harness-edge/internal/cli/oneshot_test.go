package cli

import (
	"runtime/debug"
	"testing"
)

// A one-shot read lets the heap grow to a quarter of the machine's memory before collecting,
// within 16 MiB and 1 GiB, and puts the collector's settings back when it is done.
func TestAOneShotReadsHeapIsBoundedByTheMachinesMemory(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		total uint64
		want  int64
	}{
		{0, 1024 * mib},           // unknown: as before
		{32 * mib, 16 * mib},      // a tiny device: the floor
		{512 * mib, 128 * mib},    // a small board
		{4096 * mib, 1024 * mib},  // a quarter, at the cap
		{65536 * mib, 1024 * mib}, // a workstation: the cap
	} {
		if got := oneShotHeap(c.total); got != c.want {
			t.Errorf("%d MiB of memory: heap %d MiB, want %d MiB", c.total/mib, got/mib, c.want/mib)
		}
	}
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	defer debug.SetGCPercent(percent)
	restore := oneShot()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Errorf("during a one-shot read the collector is at %d%%, want off", p)
	}
	if l := debug.SetMemoryLimit(-1); l < 16*mib || l > 1024*mib {
		t.Errorf("during a one-shot read the memory limit is %d", l)
	}
	restore()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("after: the collector is at %d%%, want 100 back", p)
	}
	if l := debug.SetMemoryLimit(-1); l != limit {
		t.Errorf("after: the memory limit is %d, want %d back", l, limit)
	}
}
