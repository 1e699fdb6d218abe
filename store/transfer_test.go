package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func open(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// member persists n checkpoints of a small harness, each with one event and the checkpoint's
// own event (the task with the first), as the runtime does, and returns its last state.
func member(t *testing.T, s *store.Store, id, parent string, subs []string, status statefmt.Status, n int) *statefmt.HarnessState {
	t.Helper()
	st := &statefmt.HarnessState{SchemaVersion: statefmt.SchemaVersion, HarnessID: id, AgentName: "A", TaskID: "quick",
		Status: statefmt.StatusRunning, ParentHarnessID: parent, CreatedAt: t0, UpdatedAt: t0}
	for i := range n {
		st.UpdatedAt = t0.Add(time.Duration(i) * time.Second)
		st.CheckpointCount = i + 1
		if i == n-1 {
			st.Status, st.SubAgentIDs = status, subs
		}
		x := store.Extras{
			Events:     []event.Event{{Type: event.Warning, HarnessID: id, Time: st.UpdatedAt, Message: fmt.Sprintf("step %d of %s", i, id)}},
			Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: id, Time: st.UpdatedAt},
		}
		if i == 0 {
			x.Task = []byte(`{"id":"quick","agent":"A"}`)
		}
		if _, err := s.PersistWith(st, x); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// family stores quick, waiting at a gate, with a sub-agent that has a sub-agent of its own.
func family(t *testing.T, s *store.Store, n int) {
	t.Helper()
	member(t, s, "quick.sub.deep", "quick.sub", nil, statefmt.StatusCompleted, 2)
	member(t, s, "quick.sub", "quick", []string{"quick.sub.deep"}, statefmt.StatusCompleted, 2)
	member(t, s, "quick", "", []string{"quick.sub"}, statefmt.StatusPaused, n)
}

func export(t *testing.T, s *store.Store, id string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := s.Export(id, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// snapshot is what the store holds of a harness, as its users see it.
type snapshot struct {
	Index  store.IndexEntry
	State  *statefmt.HarnessState
	Task   string
	Events []event.Event
}

func snap(t *testing.T, s *store.Store, id string) snapshot {
	t.Helper()
	var sn snapshot
	var err error
	if sn.Index, err = s.Index(id); err != nil {
		t.Fatal(err)
	}
	if sn.State, err = s.Restore(id); err != nil {
		t.Fatal(err)
	}
	task, err := s.Task(id)
	if err != nil {
		t.Fatal(err)
	}
	sn.Task = string(task)
	if err := s.Events(id, 0, func(e event.Event) bool { sn.Events = append(sn.Events, e); return true }); err != nil {
		t.Fatal(err)
	}
	return sn
}

// dump is every key and value of a closed store's database.
func dump(t *testing.T, dir string) map[string]string {
	t.Helper()
	db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{Logger: silent{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	return out
}

func noProblems(t *testing.T, s *store.Store) {
	t.Helper()
	if probs, err := s.Verify(""); err != nil || len(probs) > 0 {
		t.Fatalf("verify: %v %v", probs, err)
	}
}

// A harness moved by export and import arrives with its whole family (sub-agents of
// sub-agents too), each with its index entry, state, task and event log, and goes on there:
// its next checkpoint and events are numbered where the first store would have numbered them.
func TestExportImportMovesTheWholeFamily(t *testing.T) {
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	family(t, a, 4)
	data := export(t, a, "quick")
	sum, err := b.Import(data, store.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"quick", "quick.sub", "quick.sub.deep"}
	if sum.Root != "quick" || !reflect.DeepEqual(sum.Harnesses, ids) || sum.Events != 2*(4+2+2) || len(sum.Replaced) != 0 {
		t.Fatalf("summary %+v", sum)
	}
	for _, id := range ids {
		if got, want := snap(t, b, id), snap(t, a, id); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s moved as\n%+v\nwant\n%+v", id, got, want)
		}
	}
	noProblems(t, b)
	// The moved family exports as the original, byte for byte.
	if !bytes.Equal(export(t, b, "quick"), data) {
		t.Fatal("the moved family exports differently")
	}
	// It goes on from where it was, on both stores alike.
	for _, s := range []*store.Store{a, b} {
		st, _ := s.Restore("quick")
		st.Status = statefmt.StatusCompleted
		cp, err := s.PersistWith(st, store.Extras{Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: "quick", Time: t0}})
		if err != nil || cp.Seq != 5 || len(cp.Events) != 1 || cp.Events[0].N != 9 || cp.Events[0].Seq != 5 {
			t.Fatalf("next checkpoint: %+v %v", cp, err)
		}
	}
	noProblems(t, b)
}

// A sub-agent moves with its parent: exporting it alone is refused, naming the parent.
func TestExportRefusesASubAgent(t *testing.T) {
	a := open(t, t.TempDir())
	defer a.Close()
	family(t, a, 2)
	if _, err := a.Export("quick.sub", &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "export quick (its sub-agents go with it)") {
		t.Fatalf("export of a sub-agent: %v", err)
	}
}

// Every single flipped bit of an export, the header and the magic included, is refused with an
// error naming the damaged part, and nothing reaches the store.
func TestImportRefusesEveryFlippedBit(t *testing.T) {
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	family(t, a, 2)
	name(t, a, "quick", "kept")
	data := export(t, a, "quick")
	what := map[string]int{}
	for bit := range len(data) * 8 {
		d := bytes.Clone(data)
		d[bit/8] ^= 1 << (bit % 8)
		_, err := b.Import(d, store.ImportOptions{Replace: true})
		var te *store.TransferError
		if !errors.As(err, &te) || te.What == "" {
			t.Fatalf("bit %d (byte %d) flipped: %v", bit, bit/8, err)
		}
		what[strings.Fields(te.What)[0]+" "+strings.Fields(te.What)[1]]++
	}
	if list, err := b.List(); err != nil || len(list) != 0 {
		t.Fatalf("damaged imports left %v (%v)", list, err)
	}
	for _, w := range []string{"the magic", "the header", "the index", "the task", "record 1", "event 1", "named checkpoint", "the closing"} {
		if what[w] == 0 {
			t.Errorf("no flip was reported in %q: %v", w, what)
		}
	}
	t.Logf("%d bits flipped, all refused: %v", len(data)*8, what)
}

// Every truncation of an export is refused.
func TestImportRefusesEveryTruncation(t *testing.T) {
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	family(t, a, 2)
	data := export(t, a, "quick")
	for n := range len(data) {
		if _, err := b.Import(data[:n], store.ImportOptions{}); err == nil {
			t.Fatalf("the first %d of %d bytes imported", n, len(data))
		}
	}
	if _, err := b.Import(append(bytes.Clone(data), 0), store.ImportOptions{}); err == nil || !strings.Contains(err.Error(), "1 bytes follow") {
		t.Fatalf("a trailing byte: %v", err)
	}
	if list, _ := b.List(); len(list) != 0 {
		t.Fatalf("truncated imports left %v", list)
	}
}

// A section cut short says how many bytes it needs and how many are left, and the first is the
// larger: a cut in the closing digest's checksum is not "32 bytes, more than the 35 left".
func TestTruncatedImportSaysMoreIsNeededThanIsLeft(t *testing.T) {
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	family(t, a, 2)
	data := export(t, a, "quick")
	said := regexp.MustCompile(`it says (\d+) bytes( and a 4-byte checksum)?, more than the (\d+) left`)
	for n := range len(data) {
		_, err := b.Import(data[:n], store.ImportOptions{})
		m := said.FindStringSubmatch(fmt.Sprint(err))
		if m == nil {
			continue
		}
		need, _ := strconv.Atoi(m[1])
		left, _ := strconv.Atoi(m[3])
		if m[2] != "" {
			need += 4
		}
		if need <= left {
			t.Fatalf("the first %d of %d bytes: %v", n, len(data), err)
		}
	}
}

// An import that fails, for whatever reason and at whatever member, leaves the target store
// exactly as it was: no harness of the family half there, no old one half gone.
func TestFailedImportLeavesTheStoreUnchanged(t *testing.T) {
	a := open(t, t.TempDir())
	family(t, a, 3)
	data := export(t, a, "quick")
	a.Close()
	bdir := t.TempDir()
	b := open(t, bdir)
	family(t, b, 5) // an older family of the same name
	member(t, b, "other", "", nil, statefmt.StatusPaused, 2)
	b.Close()
	before := dump(t, bdir)
	damaged := bytes.Clone(data)
	damaged[len(damaged)-40] ^= 4
	for _, c := range []struct {
		name string
		data []byte
		o    store.ImportOptions
		want string
	}{
		{"without replace", data, store.ImportOptions{}, "already exists: quick, quick.sub, quick.sub.deep"},
		{"damaged", damaged, store.ImportOptions{Replace: true}, "export is damaged"},
		{"a sub-agent's task refused", data, store.ImportOptions{Replace: true, CheckTask: func(id string, _ []byte) error {
			if id == "quick.sub.deep" {
				return errors.New("unknown agent B")
			}
			return nil
		}}, "harness quick.sub.deep: its task: unknown agent B"},
		{"format 1", []byte("HECHAIN1\n\x02{}"), store.ImportOptions{Replace: true}, "format-1 chain export"},
	} {
		b := open(t, bdir)
		_, err := b.Import(c.data, c.o)
		b.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
		if after := dump(t, bdir); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the failed import changed the store", c.name)
		}
	}
}

// A replacing import replaces the whole family: the old event log, checkpoints and sub-agents
// the export does not carry are gone, so the log reads as on the first store.
func TestImportReplaceDropsTheOldEventLog(t *testing.T) {
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	family(t, a, 2)
	data := export(t, a, "quick")
	family(t, b, 6)
	member(t, b, "quick.extra", "quick", nil, statefmt.StatusCompleted, 1)
	member(t, b, "other", "", nil, statefmt.StatusPaused, 1)
	sum, err := b.Import(data, store.ImportOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sum.Replaced, []string{"quick", "quick.extra", "quick.sub", "quick.sub.deep"}) {
		t.Fatalf("replaced %v", sum.Replaced)
	}
	for _, id := range []string{"quick", "quick.sub", "quick.sub.deep"} {
		got, want := snap(t, b, id), snap(t, a, id)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s after replace: %d events, head %d; want %d events, head %d", id, len(got.Events), got.Index.HeadSeq, len(want.Events), want.Index.HeadSeq)
		}
		seqs := map[uint64]bool{}
		for _, e := range got.Events {
			if e.Type == event.Checkpoint {
				if seqs[e.Seq] {
					t.Fatalf("%s: checkpoint %d logged twice", id, e.Seq)
				}
				seqs[e.Seq] = true
			}
		}
	}
	if _, err := b.Index("quick.extra"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the old family's extra sub-agent is still there: %v", err)
	}
	if _, err := b.Index("other"); err != nil {
		t.Fatalf("another family was touched: %v", err)
	}
	noProblems(t, b)
}

// A replacing import does not take a harness away from another family.
func TestImportReplaceRefusesAHarnessOfAnotherFamily(t *testing.T) {
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	family(t, a, 2)
	member(t, b, "quick.sub", "other", nil, statefmt.StatusCompleted, 1)
	member(t, b, "other", "", []string{"quick.sub"}, statefmt.StatusPaused, 1)
	_, err := b.Import(export(t, a, "quick"), store.ImportOptions{Replace: true})
	if err == nil || !strings.Contains(err.Error(), "quick.sub, which belongs to the family of other in this store") {
		t.Fatalf("import over another family's harness: %v", err)
	}
}

// An import without --replace that meets a harness of another family (here a harness of its
// own, as the id of a sub-agent of the export) says that --replace would not do either,
// rather than pointing at it.
func TestImportOverAnotherFamilysHarnessDoesNotSuggestReplace(t *testing.T) {
	a, b := open(t, t.TempDir()), open(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	family(t, a, 2)
	member(t, b, "quick.sub", "", nil, statefmt.StatusCompleted, 1)
	data := export(t, a, "quick")
	for _, replace := range []bool{false, true} {
		_, err := b.Import(data, store.ImportOptions{Replace: replace})
		if !errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), "quick.sub, which belongs to the family of quick.sub in this store: importing quick would take it away from there, with or without --replace") || strings.Contains(err.Error(), "use --replace") {
			t.Fatalf("import (replace %v) over a harness of another family: %v", replace, err)
		}
	}
}

// Replacing a harness's state with a JSON state keeps its task and event log: the state becomes
// the next checkpoint, and the log says so. A state of another task is refused.
func TestImportStateReplaceKeepsTaskAndEvents(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	family(t, s, 3)
	before := snap(t, s, "quick")
	st := clone(t, before.State)
	st.Status = statefmt.StatusFailed
	cp, err := s.ImportState(st, true)
	if err != nil || cp.Seq != 4 {
		t.Fatalf("replace: %+v %v", cp, err)
	}
	after := snap(t, s, "quick")
	if after.Task != before.Task || after.State.Status != statefmt.StatusFailed {
		t.Fatalf("task %q, status %s", after.Task, after.State.Status)
	}
	if n := len(before.Events); len(after.Events) != n+2 || !reflect.DeepEqual(after.Events[:n], before.Events) ||
		after.Events[n].N != uint64(n+1) || after.Events[n+1].Seq != 4 || !strings.Contains(after.Events[n].Message, "state replaced by import") {
		t.Fatalf("events after the replace: %+v", after.Events[len(before.Events):])
	}
	st.TaskID = "another"
	if _, err := s.ImportState(st, true); err == nil || !strings.Contains(err.Error(), `runs task "quick", this state is of task "another"`) {
		t.Fatalf("a state of another task: %v", err)
	}
	if _, err := s.ImportState(st, false); !errors.Is(err, store.ErrExists) {
		t.Fatalf("without replace: %v", err)
	}
	noProblems(t, s)
}

// An import is one batch: whichever file-system operation of it fails, a restart on what was
// synced finds the old family or the new one, whole, and never the old one after an
// acknowledged import.
func TestImportIsAllOrNothingUnderIOErrors(t *testing.T) {
	a := open(t, t.TempDir())
	family(t, a, 3)
	data := export(t, a, "quick")
	a.Close()
	base := vfs.NewCrashableMem()
	s, err := store.OpenStore("store", store.StoreOptions{FS: base, ErrorLog: discard{}})
	if err != nil {
		t.Fatal(err)
	}
	family(t, s, 5)
	member(t, s, "other", "", nil, statefmt.StatusPaused, 2)
	s.Close()
	start := base.CrashClone(vfs.CrashCloneCfg{})
	memDump := func(fs vfs.FS) map[string]string {
		t.Helper()
		db, err := pebble.Open("store/db", &pebble.Options{FS: fs, Logger: silent{}})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		it, _ := db.NewIter(nil)
		defer it.Close()
		out := map[string]string{}
		for ok := it.First(); ok; ok = it.Next() {
			out[string(it.Key())] = string(it.Value())
		}
		return out
	}
	// run imports on a copy of the starting store, failing its fail-th file-system operation
	// from the import on (none when fail < 0), and returns what a restart finds.
	var ops atomic.Int32
	run := func(fail int32) (acked bool, after map[string]string) {
		mem := start.CrashClone(vfs.CrashCloneCfg{})
		var armed atomic.Bool
		ops.Store(0)
		inj := errorfs.InjectorFunc(func(errorfs.Op) error {
			if armed.Load() && ops.Add(1)-1 == fail {
				return errorfs.ErrInjected
			}
			return nil
		})
		func() {
			defer func() { _ = recover() }() // Pebble's Fatalf: the process would have died here
			s, err := store.OpenStore("store", store.StoreOptions{FS: errorfs.Wrap(mem, inj), ErrorLog: discard{}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			armed.Store(true)
			_, err = s.Import(data, store.ImportOptions{Replace: true})
			acked = err == nil
		}()
		return acked, memDump(mem.CrashClone(vfs.CrashCloneCfg{}))
	}
	old := memDump(start.CrashClone(vfs.CrashCloneCfg{}))
	acked, imported := run(-1)
	total := ops.Load()
	if !acked || reflect.DeepEqual(imported, old) {
		t.Fatal("the import without errors did not change the store")
	}
	failed := 0
	for i := range total {
		acked, after := run(i)
		switch {
		case reflect.DeepEqual(after, imported):
		case reflect.DeepEqual(after, old) && !acked:
		default:
			t.Fatalf("error at operation %d of %d (import acknowledged: %v): the store is neither the old family nor the new", i, total, acked)
		}
		if !acked {
			failed++
		}
	}
	if failed == 0 {
		t.Fatalf("no injected error surfaced in %d runs", total)
	}
	t.Logf("%d operations, %d runs saw the injected error; every store was the old family or the new", total, failed)
}

// replicaOf reads a harness of s as a replica holds it: the index entry, the task, the records
// from the keyframe to the head and the events, as stored.
func replicaOf(t *testing.T, s *store.Store, id string) store.Replica {
	t.Helper()
	e, err := s.Index(id)
	if err != nil {
		t.Fatal(err)
	}
	var r store.Replica
	if r.IndexJSON, err = json.Marshal(e); err != nil {
		t.Fatal(err)
	}
	if r.Task, err = s.Task(id); err != nil {
		t.Fatal(err)
	}
	err = s.StoredRecords(id, e.KeyframeSeq-1, func(seq uint64, env []byte) error {
		r.Records = append(r.Records, env)
		return nil
	})
	if err == nil {
		err = s.StoredEvents(id, 0, func(n uint64, data []byte) error {
			r.Events = append(r.Events, store.ReplicaEvent{N: n, Data: data})
			return nil
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A replica (what a fleet's hub holds) imports as an export does: the harness reads the same
// on the other store; a dry run, a record that does not verify, a chain with a record missing
// and a harness the store holds are each refused or write nothing.
func TestImportReplicaVerifiesTheChainAndIsAllOrNothing(t *testing.T) {
	a := open(t, t.TempDir())
	defer a.Close()
	want := member(t, a, "solo", "", nil, statefmt.StatusRunning, 4)
	rep := replicaOf(t, a, "solo")
	bdir := t.TempDir()
	b := open(t, bdir)
	member(t, b, "other", "", nil, statefmt.StatusPaused, 2)
	b.Close()
	before := dump(t, bdir)
	flipped := rep
	flipped.Records = slices.Clone(rep.Records)
	last := bytes.Clone(flipped.Records[len(flipped.Records)-1])
	last[len(last)-10] ^= 1
	flipped.Records[len(flipped.Records)-1] = last
	type refusal struct {
		name string
		r    store.Replica
		o    store.ImportOptions
		want string
	}
	cases := []refusal{
		{"dry run", rep, store.ImportOptions{DryRun: true}, ""},
		{"a record flipped", flipped, store.ImportOptions{}, "replica does not verify: harness solo"},
		{"a bad index entry", store.Replica{IndexJSON: []byte(`{"id":`)}, store.ImportOptions{}, "the replicated index entry does not decode"},
	}
	// A record missing between the keyframe and the head: there are none between them on the
	// backend without the engine, whose every record is a keyframe.
	if len(rep.Records) >= 2 {
		gap := rep
		gap.Records = slices.Delete(slices.Clone(rep.Records), 1, 2)
		cases = append(cases, refusal{"a record missing", gap, store.ImportOptions{}, "replica does not verify: harness solo"})
	} else if e, _ := bridge.Load(); e.Backend() != bridge.BackendFallback {
		t.Fatalf("a chain of one record on the %s backend", e.Backend())
	}
	for _, c := range cases {
		b := open(t, bdir)
		_, err := b.ImportReplica(c.r, c.o)
		b.Close()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
		if after := dump(t, bdir); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the store changed", c.name)
		}
	}
	b = open(t, bdir)
	defer b.Close()
	if _, err := b.ImportReplica(rep, store.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := b.Restore("solo")
	if err != nil || got.CheckpointCount != want.CheckpointCount || got.Status != want.Status {
		t.Fatalf("imported replica: %+v, %v", got, err)
	}
	if _, err := b.ImportReplica(rep, store.ImportOptions{}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a second import: %v, want ErrExists", err)
	}
}

// A family of replicas (a root, its sub-agent and that one's sub-agent) is gathered from its
// root, each sub-agent read once, and imported in one batch; a sub-agent as the root, a
// sub-agent the reader does not have, and a family without one of its members are refused and
// write nothing.
func TestImportReplicasMovesAWholeFamily(t *testing.T) {
	a := open(t, t.TempDir())
	defer a.Close()
	family(t, a, 3)
	reps := map[string]store.Replica{}
	for _, id := range []string{"quick", "quick.sub", "quick.sub.deep"} {
		reps[id] = replicaOf(t, a, id)
	}
	var reads []string
	read := func(id string) (store.Replica, error) {
		reads = append(reads, id)
		r, ok := reps[id]
		if !ok {
			return store.Replica{}, fmt.Errorf("%w: no replica of %s", store.ErrNotFound, id)
		}
		return r, nil
	}
	bdir := t.TempDir()
	b := open(t, bdir)
	member(t, b, "other", "", nil, statefmt.StatusPaused, 2)
	if _, err := b.ReplicaFamily(reps["quick.sub"], read); err == nil || !strings.Contains(err.Error(), "harness quick.sub is a sub-agent of quick: adopt quick") {
		t.Fatalf("a sub-agent as the root: %v", err)
	}
	fam, err := b.ReplicaFamily(reps["quick"], read)
	if err != nil || len(fam) != 3 || !reflect.DeepEqual(reads, []string{"quick.sub", "quick.sub.deep"}) {
		t.Fatalf("the family: %d replicas, read %v, %v", len(fam), reads, err)
	}
	delete(reps, "quick.sub.deep")
	if _, err := b.ReplicaFamily(reps["quick"], read); err == nil || !strings.Contains(err.Error(), "harness quick.sub lists sub-agent quick.sub.deep, which was not read") {
		t.Fatalf("a sub-agent missing: %v", err)
	}
	b.Close()
	before := dump(t, bdir)
	for name, rs := range map[string][]store.Replica{"without its deepest member": fam[:2], "the root alone": fam[:1], "none": nil} {
		b := open(t, bdir)
		_, err := b.ImportReplicas(rs, store.ImportOptions{})
		b.Close()
		if err == nil {
			t.Fatalf("%s: imported", name)
		}
		if after := dump(t, bdir); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the store changed", name)
		}
		t.Logf("%s: %v", name, err)
	}
	b = open(t, bdir)
	defer b.Close()
	sum, err := b.ImportReplicas(fam, store.ImportOptions{DryRun: true})
	if err != nil || !reflect.DeepEqual(sum.Harnesses, []string{"quick", "quick.sub", "quick.sub.deep"}) {
		t.Fatalf("dry run: %+v, %v", sum, err)
	}
	if _, err := b.Index("quick"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the dry run wrote: %v", err)
	}
	if _, err := b.ImportReplicas(fam, store.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"quick", "quick.sub", "quick.sub.deep"} {
		want, _ := a.Restore(id)
		got, err := b.Restore(id)
		if err != nil || got.Status != want.Status || got.CheckpointCount != want.CheckpointCount || !slices.Equal(got.SubAgentIDs, want.SubAgentIDs) {
			t.Fatalf("%s imported: %+v, %v", id, got, err)
		}
	}
	if _, err := b.ImportReplicas(fam, store.ImportOptions{}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a second import: %v, want ErrExists", err)
	}
}

// An import refused for want of disk says so in an import's words: what the import needs, and
// to import again once there is room (not to resume, as a refused checkpoint says). Nothing is
// imported, and with room the same import goes through.
func TestImportOnAFullDiskSaysToImportAgain(t *testing.T) {
	a := open(t, t.TempDir())
	family(t, a, 3)
	data := export(t, a, "quick")
	a.Close()
	dir := t.TempDir()
	full, err := store.OpenStore(dir, store.StoreOptions{MinFree: 1 << 60})
	if err != nil {
		t.Fatal(err)
	}
	_, err = full.Import(data, store.ImportOptions{})
	if ls, lerr := full.List(); lerr != nil || len(ls) != 0 {
		t.Fatalf("the refused import left %v (%v)", ls, lerr)
	}
	full.Close()
	if !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), "and the import needs") || !strings.HasSuffix(err.Error(), "nothing was written: free some space, then import again") {
		t.Fatalf("an import on a full disk: %v", err)
	}
	b := open(t, dir)
	defer b.Close()
	if _, err := b.Import(data, store.ImportOptions{}); err != nil {
		t.Fatalf("the import with room: %v", err)
	}
}
