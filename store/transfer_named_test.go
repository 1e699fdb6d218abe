package store_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

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
