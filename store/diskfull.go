package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ErrDiskFull matches (errors.Is) a checkpoint refused because the store's disk is nearly full.
// Nothing was written: the harness's last checkpoint stands, and it goes on from there once
// there is room again.
var ErrDiskFull = errors.New("the store's disk is full")

// DiskFullError says how much room there is and how much a checkpoint needs.
type DiskFullError struct {
	Dir string
	// Free is the space left; Need what the checkpoint needs, Reserve included.
	Free, Need, Reserve int64
	// Import is set when what was refused is an import, which the user runs again (a
	// checkpoint's harness is resumed).
	Import bool
	// Open is set when what was refused is opening the store to write (see openRoom).
	Open bool
}

func (e *DiskFullError) Error() string {
	if e.Open {
		return fmt.Sprintf("%v: %s has %d KiB free, and opening the store to write needs %d KiB: its database writes what its log holds (%d KiB) to a table, and starts a new log; nothing was written: free some space, then try again (ls, show and the other reads work meanwhile)",
			ErrDiskFull, e.Dir, e.Free>>10, e.Need>>10, (e.Need-e.Reserve)>>10)
	}
	what, then := "a checkpoint", "resume"
	if e.Import {
		what, then = "the import", "import again"
	}
	return fmt.Sprintf("%v: %s has %d KiB free, and %s needs %d KiB with the %d KiB the store keeps free for its own work; nothing was written: free some space, then %s",
		ErrDiskFull, e.Dir, e.Free>>10, what, e.Need>>10, e.Reserve>>10, then)
}

func (e *DiskFullError) Unwrap() error { return ErrDiskFull }

// openRoom is the room Pebble needs to open a database for writing, besides the bytes of its
// write-ahead log (which it replays and writes to a table first): a new log, which it
// preallocates at 110 % of its 4 MiB memtable, and a new manifest. On a disk without that room
// its open retried the failing flush for as long as the disk stayed full, at full CPU.
const openRoom = 5 << 20

// checkOpenRoom refuses to open the store to write when its disk has less than openRoom free
// besides its write-ahead log (less than the reserve, when that is set lower).
func (s *Store) checkOpenRoom() error {
	if s.minFree == 0 || s.readOnly {
		return nil
	}
	free, err := freeBytes(s.dir)
	if err != nil {
		return nil // the open itself will say what is wrong
	}
	reserve := min(s.minFree, openRoom)
	need := reserve + logBytes(filepath.Join(s.dir, "db"))
	if free < need {
		return &DiskFullError{Dir: s.dir, Free: free, Need: need, Reserve: reserve, Open: true}
	}
	return nil
}

// roomProbe is the size of checkpoint CheckRoom asks room for: a step's usual one, with room
// to spare.
const roomProbe = 256 << 10

// CheckRoom says whether a checkpoint of a usual size would be accepted now: nil, or the
// *DiskFullError it would get. A daemon polls it to resume the harnesses a full disk paused.
func (s *Store) CheckRoom() error { return s.checkRoom(roomProbe, false) }

// roomFresh and roomSlack bound how a free-space reading is reused: for at most roomFresh, and
// only while it shows more than roomSlack above what the commit needs once the bytes committed
// since are taken off. Near the line every commit reads the disk again. A statfs costs about
// 9 µs, a few percent of a step, and another process would have to write roomSlack in
// roomFresh (6 GB/s) to slip a commit past the reserve.
const (
	roomFresh = 10 * time.Millisecond
	roomSlack = 64 << 20
)

// roomReading is the store's last free-space reading (see roomFresh).
type roomReading struct {
	mu    sync.Mutex
	at    time.Time
	free  int64 // what statfs said
	spent int64 // what commits were let through since, counted twice as checkRoom does
}

// checkRoom refuses a commit of n bytes that would leave less than the store's reserve free.
// Pebble treats a failed log write as fatal, so the store must not start one it cannot finish.
// A settling commit (one that pauses, stops or ends a harness: it is what makes a full disk
// safe to wait out) may use three quarters of the reserve; the last quarter is Pebble's.
func (s *Store) checkRoom(n int64, settling bool) error {
	if s.minFree == 0 {
		return nil
	}
	reserve := s.minFree
	if settling {
		reserve /= 4
	}
	need := reserve + 2*n
	r := &s.room
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.at) < roomFresh && r.free-r.spent >= need+roomSlack {
		r.spent += 2 * n
		return nil
	}
	free, err := freeBytes(s.dir)
	if err != nil {
		r.at = time.Time{}
		return nil // the commit itself will say what is wrong
	}
	r.at, r.free, r.spent = now, free, 2*n
	if free < need {
		r.at = time.Time{}
		return &DiskFullError{Dir: s.dir, Free: free, Need: need, Reserve: reserve}
	}
	return nil
}

// freeBytes is the space free to an unprivileged user on dir's file system.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
