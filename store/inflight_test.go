package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// gatedFS holds every fsync of the write-ahead log while it is closed: a checkpoint's batch is
// then in the log (in the file system's unsynced data) and not on the disk.
type gatedFS struct {
	vfs.FS
	mu     sync.Mutex
	gate   chan struct{} // nil: open
	waiter atomic.Int32  // fsyncs waiting at the gate
}

func (fs *gatedFS) close() {
	fs.mu.Lock()
	fs.gate = make(chan struct{})
	fs.mu.Unlock()
}

func (fs *gatedFS) open() {
	fs.mu.Lock()
	if fs.gate != nil {
		close(fs.gate)
		fs.gate = nil
	}
	fs.mu.Unlock()
}

func (fs *gatedFS) wait() {
	fs.mu.Lock()
	g := fs.gate
	fs.mu.Unlock()
	if g != nil {
		fs.waiter.Add(1)
		<-g
		fs.waiter.Add(-1)
	}
}

func (fs *gatedFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gatedFile{File: f, fs: fs}, nil
}

func (fs *gatedFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *gatedFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

// gatedStore opens a store in memory whose log's fsyncs the returned gate holds while closed;
// the test's end opens the gate before it closes the store, which waits for the fsync.
func gatedStore(t *testing.T) (*store.Store, *gatedFS) {
	fs := &gatedFS{FS: vfs.NewMem()}
	s, err := store.OpenStore("store", store.StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	t.Cleanup(fs.open) // runs first
	return s, fs
}

type gatedFile struct {
	vfs.File
	fs *gatedFS
}

func (f *gatedFile) Sync() error     { f.fs.wait(); return f.File.Sync() }
func (f *gatedFile) SyncData() error { f.fs.wait(); return f.File.SyncData() }

// A checkpoint written without waiting for its fsync returns while the fsync is held; its
// events are not read, and Wait and the readers of the harness's state, index and records do
// not return, until it is through; and a power cut before then loses that checkpoint and keeps
// the one before it.
func TestACheckpointInFlightIsDurableOnlyOnceWaitReturns(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fs := &gatedFS{FS: mem}
	s, err := store.OpenStore("store", store.StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer fs.open() // before Close, which waits for the fsync, when the test fails with it held
	st := crashStart()
	mark := func(n int) store.Extras {
		return store.Extras{Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: st.HarnessID, Time: time.Unix(int64(n), 0)}}
	}
	crashStep(st, 1)
	if _, err := s.PersistWith(st, mark(1)); err != nil {
		t.Fatal(err)
	}
	fs.close()
	crashStep(st, 2)
	x := mark(2)
	x.Events, x.NoSyncWait = []event.Event{{Type: event.StepCompleted, HarnessID: st.HarnessID, StepID: "s2", Time: time.Unix(2, 0)}}, true
	cp, err := s.PersistWith(st, x)
	if err != nil {
		t.Fatal(err)
	}
	for fs.waiter.Load() == 0 { // Pebble's log writer reaches the gate
		time.Sleep(time.Millisecond)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	// Its events are not read before they are durable, by Events nor by StoredEvents.
	var read []uint64
	if err := s.Events(st.HarnessID, 0, func(e event.Event) bool { read = append(read, e.N); return true }); err != nil {
		t.Fatal(err)
	}
	if err := s.StoredEvents(st.HarnessID, 0, func(n uint64, _ []byte) error { read = append(read, n); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 1}; !slices.Equal(read, want) {
		t.Fatalf("events read while checkpoint 2's fsync is held: %v; want checkpoint 1's only, by each reader (%v)", read, want)
	}
	// Wait, and every reader of the harness's state, index or records, waits for the fsync,
	// and then reads checkpoint 2.
	readers := map[string]func() (uint64, error){
		"Wait": func() (uint64, error) { c, err := cp.Wait(); return c.Seq, err },
		"Restore": func() (uint64, error) {
			st, err := s.Restore(st.HarnessID)
			if err != nil {
				return 0, err
			}
			return uint64(st.CheckpointCount), nil
		},
		"Index": func() (uint64, error) { e, err := s.Index(st.HarnessID); return e.HeadSeq, err },
		"List": func() (uint64, error) {
			l, err := s.List()
			if err != nil || len(l) != 1 {
				return 0, fmt.Errorf("%d entries, %v", len(l), err)
			}
			return l[0].HeadSeq, nil
		},
		"Inspect": func() (uint64, error) {
			r, err := s.Inspect(st.HarnessID)
			if err != nil || len(r) == 0 {
				return 0, fmt.Errorf("%d records, %v", len(r), err)
			}
			return r[len(r)-1].Seq, nil
		},
		"StoredRecords": func() (uint64, error) {
			var last uint64
			err := s.StoredRecords(st.HarnessID, 0, func(seq uint64, _ []byte) error { last = seq; return nil })
			return last, err
		},
	}
	type answer struct {
		who string
		seq uint64
		err error
	}
	answers := make(chan answer, len(readers))
	for who, read := range readers {
		go func() { seq, err := read(); answers <- answer{who, seq, err} }()
	}
	select {
	case a := <-answers:
		t.Fatalf("%s returned (%d, %v) while the fsync was held", a.who, a.seq, a.err)
	case <-time.After(50 * time.Millisecond):
	}
	fs.open()
	for range readers {
		if a := <-answers; a.err != nil || a.seq != 2 {
			t.Fatalf("%s once the fsync was through: %d, %v; want 2", a.who, a.seq, a.err)
		}
	}
	read = nil
	if err := s.Events(st.HarnessID, 0, func(e event.Event) bool { read = append(read, e.N); return true }); err != nil || !slices.Equal(read, []uint64{1, 2, 3}) {
		t.Fatalf("events once checkpoint 2 is durable: %v, %v; want 1, 2, 3", read, err)
	}

	r, err := store.OpenStore("store", store.StoreOptions{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Restore(st.HarnessID)
	if err != nil || got.CheckpointCount != 1 {
		t.Fatalf("after a power cut with checkpoint 2 in flight: %v, %v; want checkpoint 1", got.CheckpointCount, err)
	}
}

// A harness released while its checkpoint's fsync is held stays the store's until the fsync is
// through: a Restore and a checkpoint meanwhile wait for it, rather than replay from the log a
// checkpoint not durable yet (and, for the checkpoint, write over its fsync); afterwards the
// store counts no checkpoint in flight.
func TestAReleaseWaitsForTheCheckpointInFlightBeforeLettingGo(t *testing.T) {
	s, fs := gatedStore(t)
	st := crashStart()
	crashStep(st, 1)
	if _, err := s.Persist(st); err != nil {
		t.Fatal(err)
	}
	fs.close()
	crashStep(st, 2)
	cp2, err := s.PersistWith(st, store.Extras{NoSyncWait: true})
	if err != nil {
		t.Fatal(err)
	}
	for fs.waiter.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	released := make(chan struct{})
	go func() { s.Release(st.HarnessID); close(released) }()
	time.Sleep(20 * time.Millisecond) // the release holds the harness, waiting for the fsync
	restored := make(chan int, 1)
	go func() {
		got, err := s.Restore(st.HarnessID)
		if err != nil {
			t.Error(err)
			restored <- -1
			return
		}
		restored <- got.CheckpointCount
	}()
	next := clone(t, st)
	crashStep(next, 3)
	persisted := make(chan store.Checkpoint, 1)
	go func() {
		cp, err := s.PersistWith(next, store.Extras{NoSyncWait: true})
		if err != nil {
			t.Error(err)
		}
		persisted <- cp
	}()
	select {
	case n := <-restored:
		t.Fatalf("Restore returned checkpoint %d while checkpoint 2's fsync was held", n)
	case <-persisted:
		t.Fatal("a checkpoint was written on the released harness while checkpoint 2's fsync was held")
	case <-time.After(50 * time.Millisecond):
	}
	fs.open()
	<-released
	if n := <-restored; n != 2 && n != 3 { // 3 when the checkpoint after the release went first
		t.Fatalf("Restore once the fsync was through: checkpoint %d, want 2 or 3", n)
	}
	cp3, err := (<-persisted).Wait()
	if err != nil || cp3.Seq != 3 {
		t.Fatalf("the checkpoint after the release: %d, %v; want 3", cp3.Seq, err)
	}
	if _, err := cp2.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := s.InFlight(); n != 0 {
		t.Fatalf("the store counts %d checkpoints in flight, want 0", n)
	}
}

// A writer that persists each checkpoint without waiting for its fsync, and counts one as
// acknowledged once the next has been written (the harness's way), loses none it acknowledged
// to a power cut at any moment.
func TestPowerLossWithCheckpointsInFlight(t *testing.T) {
	powerCuts(t, 4, 5, func(s *store.Store, ack func(int)) error {
		st := crashStart()
		var prev store.Checkpoint
		for n := 1; n <= 60; n++ {
			crashStep(st, n)
			cp, err := s.PersistWith(st, store.Extras{NoSyncWait: true})
			if err != nil {
				return err
			}
			if n > 1 {
				if _, err := prev.Wait(); err != nil {
					return err
				}
				ack(n - 1)
			}
			prev = cp
		}
		if _, err := prev.Wait(); err != nil {
			return err
		}
		ack(60)
		return nil
	})
}

// The owner of a checkpoint written without waiting hears of it once the next one is written:
// its record can be read then, even when that next checkpoint is a keyframe that released it,
// and even when a reader (a replicator listing the store) saw the checkpoint through to durable
// before that keyframe was written.
func TestTheRecordBeforeAKeyframeCanBeReadWhenItsCheckpointIsAnnounced(t *testing.T) {
	for _, reader := range []bool{false, true} {
		t.Run(fmt.Sprintf("reader waited %v", reader), func(t *testing.T) {
			recordBeforeAKeyframeCanBeReadWhenAnnounced(t, reader)
		})
	}
}

func recordBeforeAKeyframeCanBeReadWhenAnnounced(t *testing.T, reader bool) {
	s, err := store.OpenStore(t.TempDir(), store.StoreOptions{Policy: bridge.ChainPolicy{MaxReplay: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := crashStart()
	var prev store.Checkpoint
	keyframes := 0
	for n := 1; n <= 12; n++ {
		crashStep(st, n)
		if reader && n > 1 {
			// List waits for every checkpoint in flight: the previous one is durable now,
			// and still not announced to its owner.
			if _, err := s.List(); err != nil {
				t.Fatal(err)
			}
		}
		cp, err := s.PersistWith(st, store.Extras{NoSyncWait: true})
		if err != nil {
			t.Fatal(err)
		}
		if n > 1 && cp.Kind == statefmt.KindKeyframe {
			// A reader of the stored records (the replicator's pass) finds it too, before the
			// owner announces it: then the keyframe after it.
			var seqs []uint64
			if err := s.StoredRecords(st.HarnessID, prev.Seq-1, func(seq uint64, _ []byte) error { seqs = append(seqs, seq); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(seqs) != 2 || seqs[0] != prev.Seq || seqs[1] != cp.Seq {
				t.Fatalf("records after %d once keyframe %d was written: %v, want %d and %d", prev.Seq-1, cp.Seq, seqs, prev.Seq, cp.Seq)
			}
		}
		if n > 1 {
			done, err := prev.Wait()
			if err != nil {
				t.Fatal(err)
			}
			env, err := s.StoredRecord(st.HarnessID, done.Seq)
			if err != nil || len(env) != done.StoredBytes {
				t.Fatalf("record %d, announced after record %d (%s) was written: %d bytes, %v", done.Seq, cp.Seq, cp.Kind, len(env), err)
			}
		}
		if cp.Kind == statefmt.KindKeyframe && n > 1 {
			keyframes++
		}
		prev = cp
	}
	if _, err := prev.Wait(); err != nil {
		t.Fatal(err)
	}
	if keyframes < 2 {
		t.Fatalf("%d keyframes after the first: the test did not cross one", keyframes)
	}
	// Once the harness writes again, the released record is gone, as any released record is.
	if _, err := s.StoredRecord(st.HarnessID, 1); err == nil {
		t.Fatal("record 1, released long ago, is still returned")
	}
}

// A checkpoint that does not wait for its fsync yields to the log's writer, so that the fsync
// starts at once, only when no other checkpoint is in flight: with one in flight the writer is
// busy, and the commits that queue meanwhile share its next fsync.
func TestACheckpointYieldsToTheLogWriterOnlyWhenItIsAlone(t *testing.T) {
	s, fs := gatedStore(t)
	yields, stop := store.CountYields()
	defer stop()
	a, b := crashStart(), crashStart()
	b.HarnessID = "crash-harness-b"
	persist := func(st *statefmt.HarnessState, n int) store.Checkpoint {
		t.Helper()
		crashStep(st, n)
		cp, err := s.PersistWith(st, store.Extras{NoSyncWait: true})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	fs.close()
	cpA := persist(a, 1)
	if n := yields(); n != 1 {
		t.Fatalf("the only checkpoint in flight yielded %d times, want 1", n)
	}
	cpB := persist(b, 1)
	if n := yields(); n != 1 {
		t.Fatalf("a checkpoint written while another's fsync was held yielded: %d yields in all, want 1", n)
	}
	fs.open()
	for _, cp := range []store.Checkpoint{cpA, cpB} {
		if _, err := cp.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := persist(a, 2).Wait(); err != nil {
		t.Fatal(err)
	}
	if n := yields(); n != 2 {
		t.Fatalf("a checkpoint alone again: %d yields in all, want 2", n)
	}
}

// A checkpoint whose owner waited for it before writing the next one was announced then: a
// keyframe after it releases its record as any other, and the store keeps no copy of it.
func TestARecordWhoseOwnerWaitedIsReleasedByTheNextKeyframe(t *testing.T) {
	s, err := store.OpenStore(t.TempDir(), store.StoreOptions{Policy: bridge.ChainPolicy{MaxReplay: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := crashStart()
	keyframes := 0
	for n := 1; n <= 12; n++ {
		crashStep(st, n)
		cp, err := s.PersistWith(st, store.Extras{NoSyncWait: true})
		if err != nil {
			t.Fatal(err)
		}
		if cp.Kind == statefmt.KindKeyframe && n > 1 {
			keyframes++
			if _, err := s.StoredRecord(st.HarnessID, cp.Seq-1); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("record %d, announced before keyframe %d was written, is still kept: %v", cp.Seq-1, cp.Seq, err)
			}
		}
		if _, err := cp.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if keyframes < 2 {
		t.Fatalf("%d keyframes after the first: the test did not cross one", keyframes)
	}
}
