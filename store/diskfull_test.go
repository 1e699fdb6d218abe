package store_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/internal/tmpfs"
	"github.com/harness-edge/harness-edge/store"
)

// The store reads its disk's free space again when another process took it: a reading made
// while the disk was nearly empty does not let checkpoints through once a big file leaves
// little room, and the checkpoint is refused, not failed in the middle of its write.
func TestDiskFullIsSeenAfterAnotherProcessFillsTheDisk(t *testing.T) {
	mnt := tmpfs.Mount(t, "160m")
	s, err := store.OpenStore(filepath.Join(mnt, "store"), store.StoreOptions{MinFree: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(5, 5))
	state := stategen.Reference(r, 20)
	for range 20 { // plenty of room: these read the disk once, or a few times
		step(r, state)
		if _, err := s.Persist(state); err != nil {
			t.Fatal(err)
		}
	}
	tmpfs.Fill(t, mnt, 6<<20)
	time.Sleep(50 * time.Millisecond)
	var err2 error
	n := 0
	for ; n < 10_000 && err2 == nil; n++ {
		step(r, state)
		_, err2 = s.Persist(state)
	}
	if !errors.Is(err2, store.ErrDiskFull) {
		t.Fatalf("after %d checkpoints on a disk with 6 MiB left: %v, want ErrDiskFull", n, err2)
	}
	if _, err := s.Restore(state.HarnessID); err != nil {
		t.Fatalf("restore after the refusal: %v", err)
	}
}

// A store whose disk has no room left is refused at once when opened to write, with the
// disk-full error, instead of Pebble's open retrying its failing flush for as long as the disk
// stays full. It still opens to read, and opens to write again once there is room.
func TestAFullDiskRefusesToOpenTheStoreToWrite(t *testing.T) {
	mnt := tmpfs.Mount(t, "64m")
	dir := filepath.Join(mnt, "store")
	s, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(6, 6))
	state := stategen.Reference(r, 20)
	for range 10 {
		step(r, state)
		if _, err := s.Persist(state); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	filler := tmpfs.Fill(t, mnt, 0)
	done := make(chan error, 1)
	go func() {
		s, err := store.OpenStore(dir, store.StoreOptions{})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		var dfe *store.DiskFullError
		if !errors.As(err, &dfe) || !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), "free some space, then try again") {
			t.Fatalf("opening the store on a full disk: %v, want the disk-full error saying what to do", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("opening the store on a full disk did not return")
	}
	rs, err := store.OpenToRead(dir)
	if err != nil {
		t.Fatalf("opening the store to read on a full disk: %v", err)
	}
	if got, err := rs.Restore(state.HarnessID); err != nil || got.CheckpointCount != state.CheckpointCount {
		t.Fatalf("reading the harness on a full disk: %v", err)
	}
	rs.Close()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s, err = store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatalf("opening the store once there is room: %v", err)
	}
	defer s.Close()
	step(r, state)
	if _, err := s.Persist(state); err != nil {
		t.Fatal(err)
	}
}

// On a disk that fills up (a real 24 MiB tmpfs), a checkpoint is refused with ErrDiskFull
// before anything is written, the process goes on (no panic, the store stays open and
// readable), and checkpoints go on once there is room again.
func TestDiskFullRefusesCheckpointsAndRecovers(t *testing.T) {
	mnt := tmpfs.Mount(t, "24m")
	e, _ := bridge.Load()
	dir := filepath.Join(mnt, "store")
	s, err := store.OpenStore(dir, store.StoreOptions{Engine: e, MinFree: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	filler := tmpfs.Fill(t, mnt, 6<<20) // the reserve is 4 MiB
	r := rand.New(rand.NewPCG(4, 4))
	state := stategen.Reference(r, 20)
	var acked uint64
	var full error
	for range 10_000 {
		step(r, state)
		cp, err := s.Persist(state)
		if err != nil {
			full = err
			break
		}
		acked = cp.Seq
	}
	var dfe *store.DiskFullError
	if !errors.Is(full, store.ErrDiskFull) || !errors.As(full, &dfe) || !strings.Contains(full.Error(), "free some space, then resume") {
		t.Fatalf("after %d checkpoints: %v, want ErrDiskFull saying what to do", acked, full)
	}
	if acked == 0 || dfe.Free >= dfe.Need {
		t.Fatalf("%d checkpoints before the refusal, free %d, need %d", acked, dfe.Free, dfe.Need)
	}
	// The refused checkpoint wrote nothing: the store still has the last acknowledged one.
	got, err := s.Restore(state.HarnessID)
	if err != nil || got.CheckpointCount != state.CheckpointCount-1 && got.CheckpointCount != state.CheckpointCount {
		t.Fatalf("restore after the refusal: %v", err)
	}
	idx, err := s.Index(state.HarnessID)
	if err != nil || idx.HeadSeq != acked {
		t.Fatalf("head %d after the refusal, want the last acknowledged %d (%v)", idx.HeadSeq, acked, err)
	}
	// Room again: the same state checkpoints, and the chain goes on.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	cp, err := s.Persist(state)
	if err != nil || cp.Seq != acked+1 {
		t.Fatalf("after freeing space: checkpoint %d, %v; want %d", cp.Seq, err, acked+1)
	}
	if probs, err := s.Verify(""); err != nil || len(probs) != 0 {
		t.Fatalf("verify: %v %v", probs, err)
	}
}
