package store_test

import (
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// name keeps the harness's head state under name.
func name(t *testing.T, s *store.Store, id, name string) {
	t.Helper()
	st, err := s.Restore(id)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := s.Index(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveNamed(id, name, idx.HeadSeq, st.UpdatedAt, st, nil); err != nil {
		t.Fatal(err)
	}
}

// namedOf is every named checkpoint of a harness, with its state and task.
func namedOf(t *testing.T, s *store.Store, id string) map[string]string {
	t.Helper()
	list, err := s.Named(id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list {
		_, st, task, err := s.RestoreNamed(id, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := statefmt.EncodeJSON(st)
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = string(b) + "\x00" + string(task)
	}
	return out
}

// An export carries the named checkpoints of every harness of the family, and an import puts
// them back as they were; a replacing import drops the old family's names and keeps the
// export's.
func TestExportImportCarriesNamedCheckpoints(t *testing.T) {
	a, b, c := open(t, t.TempDir()), open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	defer c.Close()
	family(t, a, 3)
	name(t, a, "quick", "before-ship")
	name(t, a, "quick", "at-gate")
	name(t, a, "quick.sub", "sub-done")
	data := export(t, a, "quick")
	sum, err := b.Import(data, store.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"quick/at-gate", "quick/before-ship", "quick.sub/sub-done"}; !reflect.DeepEqual(sum.Named, want) {
		t.Fatalf("named %v, want %v", sum.Named, want)
	}
	for _, id := range []string{"quick", "quick.sub", "quick.sub.deep"} {
		if got, want := namedOf(t, b, id), namedOf(t, a, id); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: named checkpoints %d, want %d", id, len(got), len(want))
		}
	}
	noProblems(t, b)

	family(t, c, 5)
	name(t, c, "quick", "old-name")
	name(t, c, "quick", "at-gate")
	if _, err := c.Import(data, store.ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := namedOf(t, c, "quick"), namedOf(t, a, "quick"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after replace: %d named checkpoints, want the export's %d", len(got), len(want))
	}
	if _, _, _, err := c.RestoreNamed("quick", "old-name"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the replaced harness's own name survived: %v", err)
	}
	noProblems(t, c)
}

// A named checkpoint that does not belong in the export (a state of another harness, one
// after the head) is refused with the rest, and nothing is imported.
func TestImportRefusesANamedCheckpointOfAnotherHarness(t *testing.T) {
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	family(t, a, 3)
	sub, err := a.Restore("quick.sub")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SaveNamed("quick", "borrowed", 2, sub.UpdatedAt, sub, nil); err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	_, err = a.Export("quick", &buf)
	if err == nil || !strings.Contains(err.Error(), `the checkpoint named borrowed is a state of harness "quick.sub"`) {
		t.Fatalf("export of a harness with a foreign named checkpoint: %v", err)
	}
}

// A replacing import writes the heads file twice around its batch (forgetting the replaced
// harnesses first, learning the imported heads after). Whichever file-system operation of it
// fails, a crash right then (only what was synced survives) leaves a store that opens without
// reporting any harness lost or behind its acknowledged head: the old family (whose head was
// above the export's) or the new one, whole.
func TestReplacingImportCrashNeverReportsAHarnessLost(t *testing.T) {
	a := open(t, t.TempDir())
	family(t, a, 3)
	data := export(t, a, "quick")
	a.Close()
	base := vfs.NewCrashableMem()
	s, err := store.OpenStore("store", store.StoreOptions{FS: base, ErrorLog: discard{}})
	if err != nil {
		t.Fatal(err)
	}
	family(t, s, 9) // the old head (9) is above the export's (3)
	member(t, s, "quick.extra", "quick", nil, statefmt.StatusCompleted, 4)
	s.Close() // the heads file names the old family
	start := base.CrashClone(vfs.CrashCloneCfg{})
	var ops atomic.Int32
	// run imports with the fail-th file-system operation failing (none when fail < 0), crashes
	// right after, and opens what was synced.
	run := func(fail int32) (acked bool, head uint64) {
		mem := start.CrashClone(vfs.CrashCloneCfg{})
		var armed atomic.Bool
		ops.Store(0)
		inj := errorfs.InjectorFunc(func(errorfs.Op) error {
			if armed.Load() && ops.Add(1)-1 == fail {
				return errorfs.ErrInjected
			}
			return nil
		})
		var crashed *vfs.MemFS
		func() {
			defer func() { _ = recover() }()
			s, err := store.OpenStore("store", store.StoreOptions{FS: errorfs.Wrap(mem, inj), ErrorLog: discard{}})
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			_, err = s.Import(data, store.ImportOptions{Replace: true})
			acked = err == nil
			crashed = mem.CrashClone(vfs.CrashCloneCfg{}) // the crash: no Close
			armed.Store(false)
			_ = s.Close()
		}()
		if crashed == nil {
			crashed = mem.CrashClone(vfs.CrashCloneCfg{})
		}
		r, err := store.OpenStore("store", store.StoreOptions{FS: crashed, ErrorLog: discard{}})
		if err != nil {
			t.Fatalf("failing operation %d: the store does not open: %v", fail, err)
		}
		defer r.Close()
		probs, err := r.Verify("")
		if err != nil || len(probs) > 0 {
			t.Fatalf("failing operation %d (import acknowledged: %v): after the crash verify reports %v %v", fail, acked, probs, err)
		}
		list, err := r.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list {
			if e.Damaged != "" {
				t.Fatalf("failing operation %d: harness %s is reported damaged: %s", fail, e.ID, e.Damaged)
			}
		}
		idx, err := r.Index("quick")
		if err != nil {
			t.Fatal(err)
		}
		_, extra := r.Index("quick.extra")
		if (idx.HeadSeq == 3) != errors.Is(extra, store.ErrNotFound) {
			t.Fatalf("failing operation %d: head %d, quick.extra %v: neither the old family nor the new", fail, idx.HeadSeq, extra)
		}
		return acked, idx.HeadSeq
	}
	if acked, head := run(-1); !acked || head != 3 {
		t.Fatalf("the import without errors: acknowledged %v, head %d", acked, head)
	}
	total := ops.Load()
	for i := range total {
		if acked, head := run(i); acked && head != 3 {
			t.Fatalf("failing operation %d: the acknowledged import is lost", i)
		}
	}
	t.Logf("%d file-system operations, each failed once: no crash left a harness reported lost", total)
}
