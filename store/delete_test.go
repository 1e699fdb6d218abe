package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// grow persists n checkpoints of harness id, each appending a reference tool call (real-ish
// text) with an event, and returns the last state.
func grow(t *testing.T, s *store.Store, r *rand.Rand, id string, n int) *statefmt.HarnessState {
	t.Helper()
	st := &statefmt.HarnessState{SchemaVersion: statefmt.SchemaVersion, HarnessID: id, AgentName: "A", TaskID: id,
		Status: statefmt.StatusCompleted, CreatedAt: t0, UpdatedAt: t0}
	for i := range n {
		step(r, st)
		x := store.Extras{Events: []event.Event{{Type: event.Warning, HarnessID: id, Time: st.UpdatedAt, Message: fmt.Sprintf("step %d", i)}}}
		if i == 0 {
			x.Task = []byte(`{"id":"` + id + `","agent":"A"}`)
		}
		if _, err := s.PersistWith(st, x); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// Deleting harnesses from a store on disk gives their space back at once (measured on the
// store's files), leaves the others whole (they restore, verify passes, also after a reopen),
// and a refused deletion (an unknown id among known ones) deletes nothing.
func TestDeleteHarnessesGivesTheDiskBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := open(t, dir)
	defer func() { s.Close() }()
	r := rand.New(rand.NewPCG(7, 7))
	var kept *statefmt.HarnessState
	ids := []string{"a", "b", "c", "d", "e"}
	for _, id := range ids {
		kept = grow(t, s, r, id, 400)
	}
	// As in a store that has been in use for a while, the data is in tables, not only in the
	// log (reopening flushes the log).
	s.Close()
	s = open(t, dir)
	if _, err := s.DeleteHarnesses(context.Background(), []string{"a", "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete with an unknown id: %v", err)
	}
	if l, _ := s.List(); len(l) != len(ids) {
		t.Fatalf("a refused delete removed harnesses: %d left", len(l))
	}
	sum, err := s.DeleteHarnesses(context.Background(), ids[:4])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("5 harnesses of 400 checkpoints, 4 deleted: store %d -> %d bytes (%d freed)", sum.BytesBefore, sum.BytesAfter, sum.Freed())
	// Four fifths of the data went; the store keeps fixed costs (logs, manifest) besides.
	if sum.BytesAfter*2 > sum.BytesBefore || len(sum.Deleted) != 4 {
		t.Fatalf("store %d -> %d bytes after deleting 4 of 5 harnesses", sum.BytesBefore, sum.BytesAfter)
	}
	check := func() {
		t.Helper()
		if l, err := s.List(); err != nil || len(l) != 1 || l[0].ID != "e" {
			t.Fatalf("list after delete: %v %v", l, err)
		}
		got, err := s.Restore("e")
		if err != nil || got.TotalToolCalls != kept.TotalToolCalls {
			t.Fatalf("restore of the kept harness: %v", err)
		}
		if probs, err := s.Verify(""); err != nil || len(probs) != 0 {
			t.Fatalf("verify after delete: %v %v", probs, err)
		}
		for _, id := range ids[:4] {
			if _, err := s.Restore(id); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("deleted %s restores: %v", id, err)
			}
			n := 0
			_ = s.Events(id, 0, func(event.Event) bool { n++; return true })
			if _, err := s.Task(id); !errors.Is(err, store.ErrNotFound) || n != 0 {
				t.Fatalf("deleted %s left its task (%v) or %d events", id, err, n)
			}
		}
	}
	check()
	s.Close()
	s = open(t, dir)
	check()
	if s.DiskUsage() > sum.BytesAfter+(1<<20) {
		t.Fatalf("the store grew back to %d bytes on reopen", s.DiskUsage())
	}
}

// A deletion waits for the tables its compaction made obsolete to be deleted, and for nothing
// else: Pebble keeps a write-ahead log to reuse, counted as obsolete and never deleted, and a
// deletion that waited for it waited out its whole deadline every time (2 s a delete, during
// which the daemon answered nothing else).
func TestDeleteHarnessesDoesNotWaitForTheLogsKeptForReuse(t *testing.T) {
	defer store.SetSettleWait(store.SetSettleWait(time.Minute))
	dir := filepath.Join(t.TempDir(), "store")
	s := open(t, dir)
	defer func() { s.Close() }()
	r := rand.New(rand.NewPCG(9, 9))
	for _, id := range []string{"a", "b", "c"} {
		grow(t, s, r, id, 50)
	}
	for _, id := range []string{"a", "b"} {
		start := time.Now()
		sum, err := s.DeleteHarnesses(context.Background(), []string{id})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("deleting %s took %v: it waited out the deadline", id, took)
		}
		if len(sum.Deleted) != 1 || sum.BytesAfter == 0 {
			t.Fatalf("delete %s: %+v", id, sum)
		}
	}
	if l, err := s.List(); err != nil || len(l) != 1 || l[0].ID != "c" {
		t.Fatalf("list after the deletions: %v %v", l, err)
	}
}

// A checkpoint that comes while a harness is deleted (a daemon's approve racing with a
// delete, say) is refused as not found: one that committed after the heads file forgot the
// harness and before the deletion's batch was acknowledged in the file, so the next open
// listed the deleted harness as damaged, lost by Pebble, and verify failed.
func TestACheckpointDuringADeletionDoesNotLeaveTheHarnessListedLost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := open(t, dir)
	defer func() { s.Close() }()
	r := rand.New(rand.NewPCG(3, 3))
	st := grow(t, s, r, "a", 5)
	grow(t, s, r, "b", 5)
	var during error
	defer store.SetBeforeDeleteBatch(func() {
		step(r, st)
		_, during = s.PersistWith(st, store.Extras{Events: []event.Event{{Type: event.Warning, HarnessID: "a", Time: st.UpdatedAt, Message: "late"}}})
	})()
	if _, err := s.DeleteHarnesses(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(during, store.ErrNotFound) {
		t.Errorf("a checkpoint during the deletion: %v, want it refused as not found", during)
	}
	only := func() {
		t.Helper()
		l, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != 1 || l[0].ID != "b" || l[0].Damaged != "" {
			t.Fatalf("the store lists %+v, want b alone, undamaged", l)
		}
		if probs, err := s.Verify(""); err != nil || len(probs) != 0 {
			t.Fatalf("verify: %v %v", probs, err)
		}
	}
	only()
	s.Close()
	s = open(t, dir)
	only()
}
