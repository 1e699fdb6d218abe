package store_test

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/reexec"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// snapshotDir maps every file under dir to its size and SHA-256: what a read must leave as it
// found it. The lock file is left out: every process that takes the lock writes its pid there.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "store.lock" {
			return nil
		}
		files[rel] = fmt.Sprintf("%d %x", len(b), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameFiles(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed the store's files:\nbefore %v\nafter  %v", what, before, after)
	}
}

// A store opened read-only reads what a read-write open reads, refuses every write with
// ErrReadOnly, still keeps other processes out, and leaves every file as it was.
func TestReadOnlyStoreReadsEverythingAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	s := openStore(t, dir, nil, bridge.ChainPolicy{})
	st := stategen.Reference(r, 20_000)
	for range 30 {
		step(r, st)
		if _, err := s.PersistWith(st, store.Extras{Events: []event.Event{{Type: event.Checkpoint, HarnessID: st.HarnessID}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)

	ro, err := store.OpenStore(dir, store.StoreOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenStore(dir, store.StoreOptions{}); !errors.Is(err, store.ErrStoreInUse) {
		t.Fatalf("a second process's open while a reader has the store: %v", err)
	}
	got, err := ro.Restore(st.HarnessID)
	if err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("read-only restore: %v (equal: %v)", err, reflect.DeepEqual(got, st))
	}
	list, err := ro.List()
	if err != nil || len(list) != 1 || list[0].HeadSeq != 30 {
		t.Fatalf("read-only list: %+v %v", list, err)
	}
	n := 0
	if err := ro.Events(st.HarnessID, 0, func(event.Event) bool { n++; return true }); err != nil || n != 30 {
		t.Fatalf("read-only events: %d, %v", n, err)
	}
	if probs, err := ro.Verify(""); err != nil || len(probs) != 0 {
		t.Fatalf("read-only verify: %v %v", probs, err)
	}
	step(r, st)
	if _, err := ro.Persist(st); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Persist on a read-only store: %v", err)
	}
	if err := ro.Delete(st.HarnessID); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Delete on a read-only store: %v", err)
	}
	if _, err := ro.AppendEvents(st.HarnessID, []event.Event{{Type: event.Warning, HarnessID: st.HarnessID}}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("AppendEvents on a read-only store: %v", err)
	}
	if got, err := ro.Restore(st.HarnessID); err != nil || got.CheckpointCount != 30 {
		t.Fatalf("after refused writes: %v %v", got, err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "a read-only open", before, snapshotDir(t, dir))

	// A directory without a database is refused, and no database is made.
	empty := t.TempDir()
	if _, err := store.OpenStore(empty, store.StoreOptions{ReadOnly: true}); !errors.Is(err, store.ErrNoDatabase) {
		t.Fatalf("read-only open of an empty directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "db")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only open made a database: %v", err)
	}
}

// After a SIGKILL in the middle of checkpointing, a read-only open reads the last acknowledged
// checkpoint (or the one in flight) from what Pebble's log holds, without recovering anything
// on disk; the writer that opens next recovers the same state.
func TestReadOnlyOpenAfterKill9ReadsTheAcknowledgedStateAndLeavesRecoveryToTheWriter(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var oracle crashOracle
	lastAck := 0
	for k := range 6 {
		cmd := reexec.Command("HARNESS_EDGE_CRASH_CHILD", dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for acks, want := 0, 5+r.IntN(20); acks < want && sc.Scan(); {
			if n, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				lastAck, _ = strconv.Atoi(n)
				acks++
			} else if strings.HasPrefix(sc.Text(), "error") {
				t.Fatalf("child: %s", sc.Text())
			}
		}
		time.Sleep(time.Duration(r.IntN(1500)) * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				lastAck, _ = strconv.Atoi(n)
			}
		}
		_ = cmd.Wait()

		before := snapshotDir(t, dir)
		ro, err := store.OpenStore(dir, store.StoreOptions{ReadOnly: true})
		if err != nil {
			t.Fatalf("kill %d: read-only open: %v", k, err)
		}
		got, err := ro.Restore("crash-harness")
		if err != nil {
			t.Fatalf("kill %d: read-only restore after %d acknowledged checkpoints: %v", k, lastAck, err)
		}
		n := got.CheckpointCount
		if n < lastAck || n > lastAck+1 || !reflect.DeepEqual(got, oracle.at(t, n)) {
			t.Fatalf("kill %d: read-only restore gave checkpoint %d (acknowledged %d; equal to the oracle's: %v)", k, n, lastAck, reflect.DeepEqual(got, oracle.at(t, n)))
		}
		events := 0
		if err := ro.Events("crash-harness", 0, func(event.Event) bool { events++; return true }); err != nil || events != n {
			t.Fatalf("kill %d: read-only events: %d for %d checkpoints, %v", k, events, n, err)
		}
		if probs, err := ro.Verify(""); err != nil || len(probs) != 0 {
			t.Fatalf("kill %d: read-only verify: %v %v", k, probs, err)
		}
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
		sameFiles(t, fmt.Sprintf("kill %d: a read-only open", k), before, snapshotDir(t, dir))

		rw, err := store.OpenStore(dir, store.StoreOptions{Policy: bridge.ChainPolicy{MaxReplay: 25}})
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
		}
		again, err := rw.Restore("crash-harness")
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("kill %d: the writer did not recover the checkpoint %d the reader read (%v)", k, n, err)
		}
		if err := rw.Close(); err != nil {
			t.Fatal(err)
		}
		lastAck = n
	}
}

func logBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for name, f := range snapshotDir(t, dir) {
		if strings.HasSuffix(name, ".log") {
			var size int64
			fmt.Sscan(f, &size)
			n += size
		}
	}
	return n
}

// OpenToRead opens read-only while the write-ahead logs a writer left are small, and
// read-write when they hold more than ReadOnlyLogLimit: that open recovers them into a table
// once, and the reads after it open read-only again with nothing to replay.
func TestOpenToReadRecoversALargeLogOnceThenReadsReadOnly(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(9, 9))
	s := openStore(t, dir, nil, bridge.ChainPolicy{})
	st := stategen.Reference(r, 4<<10)
	if _, err := s.Persist(st); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := logBytes(t, dir); n == 0 || n > store.ReadOnlyLogLimit {
		t.Fatalf("a small store's logs hold %d bytes", n)
	}
	before := snapshotDir(t, dir)
	ro, err := store.OpenToRead(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Persist(st); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("OpenToRead of a store with a small log: Persist gave %v, want ErrReadOnly", err)
	}
	ro.Close()
	sameFiles(t, "OpenToRead of a store with a small log", before, snapshotDir(t, dir))

	s = openStore(t, dir, nil, bridge.ChainPolicy{})
	big := stategen.Reference(r, 6<<20)
	big.HarnessID = "big"
	if _, err := s.Persist(big); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := logBytes(t, dir); n <= store.ReadOnlyLogLimit {
		t.Fatalf("the logs hold only %d bytes after a large checkpoint", n)
	}
	rw, err := store.OpenToRead(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rw.Restore("big"); err != nil || !reflect.DeepEqual(got, big) {
		t.Fatalf("restore after OpenToRead recovered the log: %v", err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if n := logBytes(t, dir); n > store.ReadOnlyLogLimit/8 {
		t.Fatalf("after the read-write open the logs still hold %d bytes", n)
	}
	before = snapshotDir(t, dir)
	ro, err = store.OpenToRead(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ro.Restore("big"); err != nil || !reflect.DeepEqual(got, big) {
		t.Fatalf("read-only restore after recovery: %v", err)
	}
	if err := ro.Delete("big"); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("the open after recovery is not read-only: Delete gave %v", err)
	}
	ro.Close()
	sameFiles(t, "OpenToRead after the log was recovered", before, snapshotDir(t, dir))
}

// A store on a read-only file system (a card the kernel remounted read-only after an I/O error,
// a backup mounted so; here a real tmpfs remounted read-only) is read as on any other: OpenToRead
// opens it, with a small write-ahead log and with a large one that it cannot recover into a
// table there, and its harnesses list, restore, verify and export as they did before (the same
// bytes), so they can be moved to another store. An open to write is refused, saying why.
func TestAStoreOnAReadOnlyFileSystemReadsAndExports(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): needs root on a real kernel", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	readOnly := func(ro bool) {
		t.Helper()
		flags := uintptr(syscall.MS_REMOUNT)
		if ro {
			flags |= syscall.MS_RDONLY
		}
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", flags, "size=64m,mode=0700"); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(5, 5))
	for _, c := range []struct {
		name  string
		bytes int
	}{{"a small log", 4 << 10}, {"a large log", 6 << 20}} {
		dir := filepath.Join(mnt, strings.ReplaceAll(c.name, " ", "-"))
		s := openStore(t, dir, nil, bridge.ChainPolicy{})
		st := stategen.Reference(r, c.bytes)
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		if _, err := s.Export(st.HarnessID, &want); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := logBytes(t, dir); (n > store.ReadOnlyLogLimit) != (c.bytes > store.ReadOnlyLogLimit) {
			t.Fatalf("%s: the logs hold %d bytes", c.name, n)
		}
		readOnly(true)
		ro, err := store.OpenToRead(dir)
		if err != nil {
			t.Fatalf("%s: OpenToRead on a read-only file system: %v", c.name, err)
		}
		if ls, err := ro.List(); err != nil || len(ls) != 1 {
			t.Fatalf("%s: list: %v %v", c.name, ls, err)
		}
		if got, err := ro.Restore(st.HarnessID); err != nil || !reflect.DeepEqual(got, st) {
			t.Fatalf("%s: restore: %v", c.name, err)
		}
		if probs, err := ro.Verify(""); err != nil || len(probs) > 0 {
			t.Fatalf("%s: verify: %v %v", c.name, probs, err)
		}
		var got strings.Builder
		if _, err := ro.Export(st.HarnessID, &got); err != nil || got.String() != want.String() {
			t.Fatalf("%s: export on a read-only file system: %v (%d bytes, want %d)", c.name, err, got.Len(), want.Len())
		}
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := store.OpenStore(dir, store.StoreOptions{}); !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "is on a read-only file system") {
			t.Fatalf("%s: an open to write: %v", c.name, err)
		}
		readOnly(false)
	}
}
