package store

import (
	"testing"
	"time"
)

// A free-space reading is reused only while it is fresh and shows room well above the line:
// near it, or once old, every commit reads the disk again.
func TestFreeSpaceReadingIsReusedOnlyFarFromTheLine(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 64 << 10
	need := s.minFree + 2*n
	for _, c := range []struct {
		name   string
		age    time.Duration
		free   int64
		reused bool
	}{
		{"fresh, far from the line", 0, need + roomSlack + 1<<20, true},
		{"fresh, near the line", 0, need + roomSlack - 1, false},
		{"old, far from the line", 2 * roomFresh, need + roomSlack + 1<<20, false},
	} {
		// A made-up reading: read again, it becomes the disk's real free space.
		s.room.at, s.room.free, s.room.spent = time.Now().Add(-c.age), c.free, 0
		if err := s.checkRoom(n, false); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if reused := s.room.free == c.free; reused != c.reused {
			t.Errorf("%s: reading reused %v, want %v", c.name, reused, c.reused)
		}
		if c.reused && s.room.spent != 2*n {
			t.Errorf("%s: %d bytes counted against the reading, want %d", c.name, s.room.spent, 2*n)
		}
	}
}
