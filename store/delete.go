package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// DeleteSummary says what DeleteHarnesses removed and what the store's files took before and
// after (the disk given back is the difference).
type DeleteSummary struct {
	Deleted     []string `json:"deleted"`
	BytesBefore uint64   `json:"bytesBefore"`
	BytesAfter  uint64   `json:"bytesAfter"`
}

// Freed is what the deletion gave back to the disk.
func (d DeleteSummary) Freed() uint64 {
	if d.BytesAfter > d.BytesBefore {
		return 0
	}
	return d.BytesBefore - d.BytesAfter
}

// DeleteHarnesses removes harnesses (their records, events, index entries and tasks) in one
// synced batch: after a crash either all of them are gone or none is. Then it compacts their
// key ranges, so that the disk they took is given back now, not at some later compaction. Ids
// the store does not hold are refused before anything is written. A full disk does not refuse a
// deletion (it is how space is made). It is RemoveHarnesses and then GiveBack.
func (s *Store) DeleteHarnesses(ctx context.Context, ids []string) (DeleteSummary, error) {
	sum, err := s.RemoveHarnesses(ids)
	if err != nil {
		return sum, err
	}
	return sum, s.GiveBack(ctx, &sum)
}

// RemoveHarnesses is DeleteHarnesses without the compaction: the harnesses are gone when it
// returns, and GiveBack (or a later compaction) gives their disk back. A caller that serialises
// its requests on a lock removes under it and gives back after: the compaction of a large store
// takes seconds, and nothing else need wait for it.
func (s *Store) RemoveHarnesses(ids []string) (DeleteSummary, error) {
	sum := DeleteSummary{BytesBefore: s.DiskUsage()}
	if len(ids) == 0 {
		return sum, nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, id := range ids {
		if err := ValidID(id); err != nil {
			return sum, err
		}
		if _, err := s.readIndex(id); err != nil && !errors.Is(err, ErrDamaged) {
			return sum, err
		}
	}
	if err := s.deleteBatch(ids, fmt.Sprintf("%d harnesses", len(ids))); err != nil {
		return sum, err
	}
	sum.Deleted = ids
	return sum, nil
}

// GiveBack compacts the key ranges of the harnesses sum says RemoveHarnesses deleted, so that
// the disk they took is given back now, and sets sum.BytesAfter.
func (s *Store) GiveBack(ctx context.Context, sum *DeleteSummary) error {
	if len(sum.Deleted) > 0 {
		if err := s.compactRanges(ctx, sum.Deleted); err != nil {
			return fmt.Errorf("deleted %d harnesses, but compacting their keys failed (the space is given back at a later compaction): %w", len(sum.Deleted), err)
		}
	}
	sum.BytesAfter = s.DiskUsage()
	return nil
}

// compactRanges compacts, per key prefix, the span that holds every deleted id's keys, which
// drops them from every level and deletes the tables that held only them.
func (s *Store) compactRanges(ctx context.Context, ids []string) error {
	for _, p := range []string{prefixIndex, prefixTask, prefixChain, prefixEvents, prefixNamed} {
		var lo, hi string
		for i, id := range ids {
			// An id's keys are p+id (index, task) or p+id+"/"+... (chain, events): all of them
			// sort from p+id up to, not including, p+id+"0" ('/' + 1).
			from, to := p+id, p+id+"0"
			if i == 0 || from < lo {
				lo = from
			}
			if i == 0 || to > hi {
				hi = to
			}
		}
		if err := s.db.Compact(ctx, []byte(lo), []byte(hi), false); err != nil {
			return err
		}
	}
	// Pebble deletes the tables a compaction made obsolete in the background: wait a moment
	// for it, so that the figures say what the disk holds. The write-ahead logs it counts as
	// obsolete are the ones it keeps to reuse, which it never deletes: waiting for them would
	// wait out the deadline at every deletion.
	for deadline := time.Now().Add(settleWait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if s.db.Metrics().Table.Local.ObsoleteSize == 0 {
			break
		}
	}
	return nil
}

// deleteBatch removes the keys of ids in one synced batch; what names them in its errors. The
// heads file forgets them first: a crash between the two writes then leaves harnesses the file
// does not name (their heads are taken from the index again at the next close), never a file
// that names harnesses the store deleted on purpose (which would report them lost). No
// checkpoint of theirs commits meanwhile (beginDelete). A full disk does not refuse it: a
// deletion is how space is made.
func (s *Store) deleteBatch(ids []string, what string) error {
	if s.readOnly {
		return ErrReadOnly
	}
	done := s.beginDelete(ids)
	defer done()
	if err := s.forgetHeads(ids, nil); err != nil {
		return fmt.Errorf("deleting %s: the heads file was not written, nothing was deleted: %w", what, err)
	}
	if beforeDeleteBatch != nil {
		beforeDeleteBatch()
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, id := range ids {
		deleteHarness(b, id)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		s.commitFailed.Store(true)
		return fmt.Errorf("deleting %s: %w", what, err)
	}
	return nil
}

// beforeDeleteBatch, when set (by tests), is called as a deletion has written the heads file
// and not yet its batch.
var beforeDeleteBatch func()

// settleWait bounds how long a deletion waits for Pebble to delete the tables its compaction
// made obsolete.
var settleWait = 2 * time.Second

// DiskUsage is what the store takes on disk: every file under its directory (DirUsage). An
// in-memory store counts Pebble's files only.
func (s *Store) DiskUsage() uint64 {
	if s.minFree == 0 { // not the real file system
		return s.db.Metrics().DiskSpaceUsage()
	}
	return DirUsage(s.dir)
}

// DirUsage is the size of every regular file under dir (a store directory: Pebble's tables,
// logs and manifest, the store's own files), whoever owns the store.
func DirUsage(dir string) uint64 {
	var n uint64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed meanwhile (an obsolete table)
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
		return nil
	})
	return n
}
