// Package storetest is the conformance suite of checkpoint stores: the behaviour the harness
// core relies on, checked the same way against every implementation (the Pebble store and the
// in-memory store). A store package runs it from its tests:
//
//	func TestPebbleStoreConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Store { return open(t) })
//	}
package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// Store is what the harness core uses of a checkpoint store.
type Store interface {
	PersistWith(state *statefmt.HarnessState, x store.Extras) (store.Checkpoint, error)
	Restore(id string) (*statefmt.HarnessState, error)
	Task(id string) ([]byte, error)
	Index(id string) (store.IndexEntry, error)
	List() ([]store.IndexEntry, error)
	Release(id string)
	IsAvailable() bool
	Events(id string, after uint64, f func(event.Event) bool) error
	AppendEvents(id string, events []event.Event) (uint64, error)
	Delete(id string) error
}

// Run runs every case of the suite as a subtest. open returns a new, empty store for one case;
// it closes the store (t.Cleanup) itself if the store needs closing.
func Run(t *testing.T, open func(t *testing.T) Store) {
	cases := []struct {
		name string
		f    func(t *testing.T, s Store)
	}{
		{"PersistRestoreRoundTrip", testRoundTrip},
		{"PropertyPersistRestore", testPropertyRoundTrip},
		{"StatesAreCopiedInAndOut", testCopies},
		{"SequenceGrowsByOnePerHarness", testSequence},
		{"IndexFollowsLatestState", testIndex},
		{"ListHasEveryHarness", testList},
		{"TaskRoundTrip", testTask},
		{"EventsNumberedInOrder", testEvents},
		{"EventsAfterAndStop", testEventsAfterAndStop},
		{"EventsBeforeFirstCheckpoint", testEventsBeforeCheckpoint},
		{"InvalidIDsRefused", testInvalidIDs},
		{"RestoreAndDeleteRefuseInvalidIDs", testInvalidIDsRestoreDelete},
		{"RefusedEventsChangeNothing", testRefusedEvents},
		{"RefusedStateChangesNothing", testRefusedState},
		{"UnknownHarnessNotFound", testUnknown},
		{"DeleteRemovesEverything", testDelete},
		{"ReleaseKeepsState", testRelease},
		{"ConcurrentPersistOnDifferentHarnesses", testConcurrentPersist},
		{"ConcurrentAppendOnOneHarness", testConcurrentAppend},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.f(t, open(t)) })
	}
}

// ---------------------------------------------------------------------------------------------
// helpers

// newState returns a small generated state named id.
func newState(r *rand.Rand, id string) *statefmt.HarnessState {
	st := stategen.State(r, stategen.Small)
	st.HarnessID = id
	return st
}

// advance moves a state on by one step: a tool call recorded, counters bumped, and sometimes a
// new status.
func advance(r *rand.Rand, st *statefmt.HarnessState) {
	st.ToolCallHistory = append(st.ToolCallHistory, stategen.Record(r, stategen.Small))
	st.TotalToolCalls = len(st.ToolCallHistory)
	st.CheckpointCount++
	st.Iterations++
	st.UpdatedAt = st.UpdatedAt.Add(time.Second)
	if r.IntN(3) == 0 {
		st.Status = statefmt.Statuses[r.IntN(len(statefmt.Statuses))]
		st.StatusReason = ""
		if st.Status == statefmt.StatusPaused || st.Status == statefmt.StatusFailed {
			st.StatusReason = "step " + fmt.Sprint(st.Iterations)
		}
	}
	statefmt.Normalize(st)
}

// canonical is a copy of st in the form every store returns.
func canonical(t testing.TB, st *statefmt.HarnessState) *statefmt.HarnessState {
	t.Helper()
	b, err := statefmt.EncodeBinary(st)
	if err != nil {
		t.Fatal(err)
	}
	c, err := statefmt.DecodeBinary(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func encodedLen(t testing.TB, st *statefmt.HarnessState) int {
	t.Helper()
	b, err := statefmt.EncodeBinary(st)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// sameState reports whether got is want as a store returns it, and if not, why.
func sameState(got, want *statefmt.HarnessState) error {
	if got == nil {
		return errors.New("restored a nil state")
	}
	w, err := statefmt.EncodeBinary(want)
	if err != nil {
		return err
	}
	c, err := statefmt.DecodeBinary(w)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(got, c) {
		g, _ := statefmt.EncodeBinary(got)
		return fmt.Errorf("restored state differs from the persisted one (binary encodings of %d and %d bytes)", len(g), len(w))
	}
	return nil
}

func persist(t testing.TB, s Store, st *statefmt.HarnessState, x store.Extras) store.Checkpoint {
	t.Helper()
	cp, err := s.PersistWith(st, x)
	if err != nil {
		t.Fatalf("PersistWith %s: %v", st.HarnessID, err)
	}
	return cp
}

func restoreEquals(t testing.TB, s Store, want *statefmt.HarnessState) {
	t.Helper()
	got, err := s.Restore(want.HarnessID)
	if err != nil {
		t.Fatalf("Restore %s: %v", want.HarnessID, err)
	}
	if err := sameState(got, want); err != nil {
		t.Fatalf("Restore %s: %v", want.HarnessID, err)
	}
}

func warning(id, msg string) event.Event {
	return event.Event{Type: event.Warning, HarnessID: id, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Message: msg}
}

// logOf is the harness's whole event log as "<n>:<message>" strings.
func logOf(t testing.TB, s Store, id string, after uint64) []string {
	t.Helper()
	var out []string
	err := s.Events(id, after, func(e event.Event) bool {
		out = append(out, fmt.Sprintf("%d:%s", e.N, e.Message))
		return true
	})
	if err != nil {
		t.Fatalf("Events %s after %d: %v", id, after, err)
	}
	return out
}

func listIDs(t testing.TB, s Store) []string {
	t.Helper()
	l, err := s.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var ids []string
	for _, e := range l {
		ids = append(ids, e.ID)
	}
	return ids
}

func wantNotFound(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: %v, want an error wrapping store.ErrNotFound", what, err)
	}
}

// ---------------------------------------------------------------------------------------------
// cases

func testRoundTrip(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(1, 1))
	states := []*statefmt.HarnessState{newState(r, "a"), newState(r, "b"), stategen.Reference(r, 20_000)}
	for _, st := range states {
		persist(t, s, st, store.Extras{})
		restoreEquals(t, s, st)
	}
	for range 6 {
		for _, st := range states {
			advance(r, st)
			persist(t, s, st, store.Extras{})
		}
		for _, st := range states {
			restoreEquals(t, s, st)
		}
	}
	// A harness restored twice gets equal states.
	a, _ := s.Restore("a")
	b, _ := s.Restore("a")
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two restores of the same checkpoint differ")
	}
}

func testPropertyRoundTrip(t *testing.T, s Store) {
	p := gopter.DefaultTestParametersWithSeed(11)
	p.MinSuccessfulTests = 100
	ps := gopter.NewProperties(p)
	n := 0
	ps.Property("Restore(PersistWith(s)) == s", prop.ForAll(func(seed uint64) bool {
		n++
		r := rand.New(rand.NewPCG(seed, 3))
		sz := stategen.Small
		if seed%8 == 0 {
			sz = stategen.Medium
		}
		st := stategen.State(r, sz)
		st.HarnessID = fmt.Sprintf("prop-%d", n) // generated ids could repeat across cases
		for i := range 3 {
			if i > 0 {
				advance(r, st)
			}
			cp, err := s.PersistWith(st, store.Extras{})
			if err != nil {
				t.Logf("PersistWith: %v", err)
				return false
			}
			if cp.Seq != uint64(i+1) {
				t.Logf("checkpoint %d has seq %d", i+1, cp.Seq)
				return false
			}
			got, err := s.Restore(st.HarnessID)
			if err == nil {
				err = sameState(got, st)
			}
			if err != nil {
				t.Logf("Restore: %v", err)
				return false
			}
		}
		return true
	}, gen.UInt64()))
	ps.TestingRun(t)
	if ids := listIDs(t, s); len(ids) != n {
		t.Fatalf("List has %d harnesses after %d cases", len(ids), n)
	}
}

func testCopies(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(2, 2))
	st := stategen.Reference(r, 5_000)
	want := canonical(t, st)
	task := []byte(`{"agent":"MARS"}`)
	evs := []event.Event{warning(st.HarnessID, "a")}
	own := &event.Event{Type: event.Checkpoint, HarnessID: st.HarnessID}
	persist(t, s, st, store.Extras{Events: evs, Task: task, Checkpoint: own})

	// The caller's values are its own: the store took copies and changed none of them.
	if evs[0].N != 0 || own.N != 0 || own.Seq != 0 || own.Kind != "" || own.StoredBytes != 0 {
		t.Fatalf("PersistWith changed the caller's events: %+v, %+v", evs[0], *own)
	}
	st.AgentName = "changed"
	st.ToolCallHistory[0].Result.Output = "changed"
	st.AgentLoopSnapshot.Scratchpad = "changed"
	st.Plan.Steps[0].Description = "changed"
	task[2] = 'X'
	restoreEquals(t, s, want)
	if got, err := s.Task(want.HarnessID); err != nil || string(got) != `{"agent":"MARS"}` {
		t.Fatalf("Task after the caller changed its bytes: %q %v", got, err)
	}

	// What the store returns is the caller's too.
	got, err := s.Restore(want.HarnessID)
	if err != nil {
		t.Fatal(err)
	}
	got.AgentName = "changed"
	got.ToolCallHistory[0].Result.Output = "changed"
	got.ToolCallHistory = got.ToolCallHistory[:1]
	got.Plan.Steps[0].Dependencies = append(got.Plan.Steps[0].Dependencies, "x")
	if got.ToolCallHistory[0].Arguments != nil {
		got.ToolCallHistory[0].Arguments[0] = ' '
	}
	restoreEquals(t, s, want)
	tk, _ := s.Task(want.HarnessID)
	tk[2] = 'Y'
	if got, err := s.Task(want.HarnessID); err != nil || string(got) != `{"agent":"MARS"}` {
		t.Fatalf("Task after the caller changed the returned bytes: %q %v", got, err)
	}
}

func testSequence(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(3, 3))
	a, b := newState(r, "seq-a"), newState(r, "seq-b")
	for i := 1; i <= 12; i++ {
		advance(r, a)
		cp := persist(t, s, a, store.Extras{})
		if cp.Seq != uint64(i) {
			t.Fatalf("checkpoint %d of %s has seq %d", i, a.HarnessID, cp.Seq)
		}
		if cp.Kind != statefmt.KindKeyframe && cp.Kind != statefmt.KindDelta {
			t.Fatalf("checkpoint %d has kind %v", i, cp.Kind)
		}
		if n := encodedLen(t, a); cp.StateBytes != n || cp.RawBytes <= 0 || cp.StoredBytes <= 0 {
			t.Fatalf("checkpoint %d: %d state, %d raw, %d stored bytes; the state encodes to %d", i, cp.StateBytes, cp.RawBytes, cp.StoredBytes, n)
		}
		if len(cp.Events) != 0 {
			t.Fatalf("checkpoint %d has events %+v without any asked for", i, cp.Events)
		}
		if i%4 == 0 { // another harness's checkpoints do not move this one's numbers
			if cp := persist(t, s, b, store.Extras{}); cp.Seq != uint64(i/4) {
				t.Fatalf("checkpoint %d of %s has seq %d", i/4, b.HarnessID, cp.Seq)
			}
		}
	}
	if cp := persist(t, s, a, store.Extras{}); cp.Seq != 13 {
		t.Fatalf("the same state persisted again: seq %d, want 13", cp.Seq)
	}
	if cp := persist(t, s, stategen.Reference(r, 3_000), store.Extras{}); cp.Seq != 1 || cp.Kind != statefmt.KindKeyframe {
		t.Fatalf("first checkpoint of a new harness: seq %d, %v; want 1, a keyframe", cp.Seq, cp.Kind)
	}
}

// checkIndex compares an index entry with the state it should describe.
func checkIndex(t testing.TB, e store.IndexEntry, st *statefmt.HarnessState, head uint64, before, after time.Time) {
	t.Helper()
	switch {
	case e.ID != st.HarnessID, e.AgentName != st.AgentName, e.TaskID != st.TaskID, e.Status != st.Status,
		e.ParentHarnessID != st.ParentHarnessID:
		t.Fatalf("index entry %+v does not describe state (%s, %s, %q, %s, parent %q)", e, st.HarnessID, st.AgentName, st.TaskID, st.Status, st.ParentHarnessID)
	case !e.CreatedAt.Equal(st.CreatedAt), !e.UpdatedAt.Equal(st.UpdatedAt):
		t.Fatalf("index entry of %s: created %v updated %v, the state says %v and %v", e.ID, e.CreatedAt, e.UpdatedAt, st.CreatedAt, st.UpdatedAt)
	case e.HeadSeq != head, e.KeyframeSeq < 1, e.KeyframeSeq > head:
		t.Fatalf("index entry of %s: head %d keyframe %d, want head %d", e.ID, e.HeadSeq, e.KeyframeSeq, head)
	case e.HeadStateBytes != uint64(encodedLen(t, st)):
		t.Fatalf("index entry of %s: head state %d bytes, it encodes to %d", e.ID, e.HeadStateBytes, encodedLen(t, st))
	case e.LastCheckpointAt.Before(before.Add(-time.Second)) || e.LastCheckpointAt.After(after.Add(time.Second)):
		t.Fatalf("index entry of %s: last checkpoint at %v, persisted between %v and %v", e.ID, e.LastCheckpointAt, before, after)
	}
}

func testIndex(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(4, 4))
	st := newState(r, "idx")
	st.ParentHarnessID, st.Depth = "", 0
	for i := 1; i <= 5; i++ {
		advance(r, st)
		st.Status = statefmt.Statuses[i%len(statefmt.Statuses)]
		st.StatusReason = ""
		if st.Status == statefmt.StatusPaused || st.Status == statefmt.StatusFailed {
			st.StatusReason = "why"
		}
		st.AgentName = fmt.Sprintf("agent-%d", i)
		st.TaskID = fmt.Sprintf("task-%d", i)
		if i == 3 {
			st.ParentHarnessID, st.Depth = "parent-1", 1
		}
		before := time.Now()
		persist(t, s, st, store.Extras{})
		after := time.Now()
		e, err := s.Index(st.HarnessID)
		if err != nil {
			t.Fatal(err)
		}
		checkIndex(t, e, st, uint64(i), before, after)
		l, err := s.List()
		if err != nil || len(l) != 1 || !reflect.DeepEqual(l[0], e) {
			t.Fatalf("List %+v, %v; want just %+v", l, err, e)
		}
	}
}

func testList(t *testing.T, s Store) {
	if l, err := s.List(); err != nil || len(l) != 0 {
		t.Fatalf("List of an empty store: %+v, %v", l, err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	var want []string
	heads := map[string]uint64{}
	for i, id := range []string{"m", "zeta", "A-1", "b.2", "alpha_3", "0", "mm"} {
		st := newState(r, id)
		for range 1 + i%3 {
			advance(r, st)
			persist(t, s, st, store.Extras{})
			heads[id]++
		}
		want = append(want, id)
	}
	slices.Sort(want)
	l, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range l {
		got = append(got, e.ID)
		if e.HeadSeq != heads[e.ID] {
			t.Fatalf("List: %s has head %d, want %d", e.ID, e.HeadSeq, heads[e.ID])
		}
		if idx, err := s.Index(e.ID); err != nil || !reflect.DeepEqual(idx, e) {
			t.Fatalf("List has %+v, Index %+v (%v)", e, idx, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List %v, want %v (every harness, ordered by id)", got, want)
	}
}

func testTask(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(6, 6))
	st := newState(r, "task")
	persist(t, s, st, store.Extras{})
	_, err := s.Task(st.HarnessID)
	wantNotFound(t, "Task of a harness persisted without one", err)

	advance(r, st)
	persist(t, s, st, store.Extras{Task: []byte(`{"v":1}`)})
	if got, err := s.Task(st.HarnessID); err != nil || string(got) != `{"v":1}` {
		t.Fatalf("Task: %q, %v", got, err)
	}
	advance(r, st)
	persist(t, s, st, store.Extras{}) // no task: the stored one stays
	if got, err := s.Task(st.HarnessID); err != nil || string(got) != `{"v":1}` {
		t.Fatalf("Task after a checkpoint without one: %q, %v", got, err)
	}
	advance(r, st)
	persist(t, s, st, store.Extras{Task: []byte(`{"v":2}`)})
	if got, err := s.Task(st.HarnessID); err != nil || string(got) != `{"v":2}` {
		t.Fatalf("Task after it was replaced: %q, %v", got, err)
	}
	// Another harness's task is its own.
	o := newState(r, "task-other")
	persist(t, s, o, store.Extras{Task: []byte(`{"other":true}`)})
	if got, err := s.Task(st.HarnessID); err != nil || string(got) != `{"v":2}` {
		t.Fatalf("Task after another harness stored one: %q, %v", got, err)
	}
}

func testEvents(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(7, 7))
	st := newState(r, "ev")
	id := st.HarnessID
	cp := persist(t, s, st, store.Extras{Events: []event.Event{warning(id, "a"), warning(id, "b")}})
	if len(cp.Events) != 2 || cp.Events[0].N != 1 || cp.Events[1].N != 2 || cp.Events[1].Message != "b" {
		t.Fatalf("first checkpoint's events: %+v, want 1 and 2", cp.Events)
	}
	if n, err := s.AppendEvents(id, []event.Event{warning(id, "c"), warning(id, "d")}); err != nil || n != 3 {
		t.Fatalf("AppendEvents: first %d, %v; want 3", n, err)
	}
	advance(r, st)
	cp = persist(t, s, st, store.Extras{Events: []event.Event{warning(id, "e")},
		Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: id, Message: "cp"}})
	if cp.Seq != 2 || len(cp.Events) != 2 || cp.Events[0].N != 5 || cp.Events[0].Message != "e" {
		t.Fatalf("second checkpoint %d: events %+v; want 5 and 6", cp.Seq, cp.Events)
	}
	own := cp.Events[1]
	if own.N != 6 || own.Type != event.Checkpoint || own.Seq != cp.Seq || own.Kind != cp.Kind.String() || own.StoredBytes != cp.StoredBytes {
		t.Fatalf("the checkpoint's own event %+v for checkpoint %+v", own, cp)
	}
	// Only a checkpoint event: it is the one event, numbered next.
	advance(r, st)
	cp = persist(t, s, st, store.Extras{Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: id, Message: "cp3"}})
	if len(cp.Events) != 1 || cp.Events[0].N != 7 || cp.Events[0].Seq != 3 {
		t.Fatalf("third checkpoint's events: %+v", cp.Events)
	}
	want := []string{"1:a", "2:b", "3:c", "4:d", "5:e", "6:cp", "7:cp3"}
	if got := logOf(t, s, id, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	// The log keeps what was stored: types, ids, times and the checkpoint's fields.
	var stored []event.Event
	if err := s.Events(id, 0, func(e event.Event) bool { stored = append(stored, e); return true }); err != nil {
		t.Fatal(err)
	}
	for _, e := range stored {
		if e.HarnessID != id {
			t.Fatalf("event %d names harness %q", e.N, e.HarnessID)
		}
	}
	if e := stored[0]; e.Type != event.Warning || !e.Time.Equal(warning(id, "").Time) {
		t.Fatalf("event 1 read back as %+v", e)
	}
	if e := stored[5]; e.Type != event.Checkpoint || e.Seq != 2 || e.Kind != own.Kind || e.StoredBytes != own.StoredBytes {
		t.Fatalf("the checkpoint's event read back as %+v, stored as %+v", e, own)
	}
	// Each harness numbers its own log.
	o := newState(r, "ev-other")
	cp = persist(t, s, o, store.Extras{Events: []event.Event{warning(o.HarnessID, "x")}})
	if cp.Events[0].N != 1 {
		t.Fatalf("another harness's first event is %d", cp.Events[0].N)
	}
	if got := logOf(t, s, id, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("log after another harness's events: %v", got)
	}
	if _, err := s.AppendEvents(id, nil); err == nil {
		t.Fatal("AppendEvents with no events succeeded")
	}
}

func testEventsAfterAndStop(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(8, 8))
	st := newState(r, "evafter")
	id := st.HarnessID
	persist(t, s, st, store.Extras{})
	for i := range 10 {
		if _, err := s.AppendEvents(id, []event.Event{warning(id, fmt.Sprint(i+1))}); err != nil {
			t.Fatal(err)
		}
	}
	for _, after := range []uint64{0, 1, 5, 9, 10, 11, 1 << 40} {
		got := logOf(t, s, id, after)
		var want []string
		for n := after + 1; n <= 10; n++ {
			want = append(want, fmt.Sprintf("%d:%d", n, n))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("events after %d: %v, want %v", after, got, want)
		}
	}
	calls := 0
	if err := s.Events(id, 3, func(e event.Event) bool {
		calls++
		return e.N < 6
	}); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Fatalf("f returned false at event 6 but was called %d times from event 4", calls)
	}
}

// A harness's log may be written before its first checkpoint (the harness is still unknown
// then); the first checkpoint's events continue it.
func testEventsBeforeCheckpoint(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(9, 9))
	st := newState(r, "early")
	id := st.HarnessID
	if n, err := s.AppendEvents(id, []event.Event{warning(id, "early")}); err != nil || n != 1 {
		t.Fatalf("AppendEvents before any checkpoint: %d, %v", n, err)
	}
	_, err := s.Restore(id)
	wantNotFound(t, "Restore of a harness with events but no checkpoint", err)
	_, err = s.Index(id)
	wantNotFound(t, "Index of a harness with events but no checkpoint", err)
	if ids := listIDs(t, s); len(ids) != 0 {
		t.Fatalf("List has %v before any checkpoint", ids)
	}
	cp := persist(t, s, st, store.Extras{Events: []event.Event{warning(id, "first")}})
	if cp.Seq != 1 || cp.Events[0].N != 2 {
		t.Fatalf("first checkpoint %d with event %d; want 1 and 2", cp.Seq, cp.Events[0].N)
	}
	restoreEquals(t, s, st)
	if got := logOf(t, s, id, 0); !reflect.DeepEqual(got, []string{"1:early", "2:first"}) {
		t.Fatalf("log %v", got)
	}
}

var invalidIDs = []string{"", "../escape", "a/b", "-lead", ".hidden", "sp ace", "é", "tab\t", strings.Repeat("a", 129)}

func testInvalidIDs(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(10, 10))
	keep := newState(r, "keep")
	persist(t, s, keep, store.Extras{Task: []byte(`{}`)})
	for _, id := range invalidIDs {
		st := newState(r, id)
		if _, err := s.PersistWith(st, store.Extras{Task: []byte(`{}`), Events: []event.Event{warning(id, "x")}}); !errors.Is(err, store.ErrInvalidID) {
			t.Fatalf("PersistWith %q: %v, want ErrInvalidID", id, err)
		}
		if _, err := s.AppendEvents(id, []event.Event{warning(id, "x")}); !errors.Is(err, store.ErrInvalidID) {
			t.Fatalf("AppendEvents %q: %v, want ErrInvalidID", id, err)
		}
		if _, err := s.Index(id); !errors.Is(err, store.ErrInvalidID) {
			t.Fatalf("Index %q: %v, want ErrInvalidID", id, err)
		}
		if _, err := s.Task(id); !errors.Is(err, store.ErrInvalidID) {
			t.Fatalf("Task %q: %v, want ErrInvalidID", id, err)
		}
		called := false
		if err := s.Events(id, 0, func(event.Event) bool { called = true; return true }); !errors.Is(err, store.ErrInvalidID) || called {
			t.Fatalf("Events %q: %v (f called: %v), want ErrInvalidID", id, err, called)
		}
		s.Release(id) // nothing to release; must not disturb anything
	}
	if ids := listIDs(t, s); !reflect.DeepEqual(ids, []string{"keep"}) {
		t.Fatalf("List after refused ids: %v", ids)
	}
	restoreEquals(t, s, keep)
	// The longest and shortest valid ids work.
	for _, id := range []string{"x", "0", strings.Repeat("z", 128), "a.b_c-D9"} {
		st := newState(r, id)
		if cp := persist(t, s, st, store.Extras{}); cp.Seq != 1 {
			t.Fatalf("%q: seq %d", id, cp.Seq)
		}
		restoreEquals(t, s, st)
	}
}

func testInvalidIDsRestoreDelete(t *testing.T, s Store) {
	for _, id := range invalidIDs {
		if _, err := s.Restore(id); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("Restore %q: %v, want ErrInvalidID", id, err)
		}
		if err := s.Delete(id); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("Delete %q: %v, want ErrInvalidID", id, err)
		}
	}
}

func testRefusedEvents(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(11, 11))
	st := newState(r, "refuse")
	id := st.HarnessID
	persist(t, s, st, store.Extras{Events: []event.Event{warning(id, "a")}, Task: []byte(`{"v":1}`)})
	want := canonical(t, st)
	idx, err := s.Index(id)
	if err != nil {
		t.Fatal(err)
	}
	other := warning("someone-else", "not mine")
	huge := warning(id, strings.Repeat("x", event.MaxBytes))
	next := *st
	next.AgentName = "next"
	refused := []struct {
		name string
		x    store.Extras
	}{
		{"another harness's event", store.Extras{Events: []event.Event{warning(id, "b"), other}, Task: []byte(`{"v":2}`)}},
		{"an oversized event", store.Extras{Events: []event.Event{huge}, Task: []byte(`{"v":2}`)}},
		{"a checkpoint event of another harness", store.Extras{Events: []event.Event{warning(id, "b")},
			Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: "someone-else"}, Task: []byte(`{"v":2}`)}},
		{"an oversized checkpoint event", store.Extras{Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: id, Message: huge.Message}}},
	}
	for _, c := range refused {
		if _, err := s.PersistWith(&next, c.x); err == nil {
			t.Fatalf("PersistWith with %s succeeded", c.name)
		}
	}
	if _, err := s.AppendEvents(id, []event.Event{warning(id, "b"), other}); err == nil {
		t.Fatal("AppendEvents with another harness's event succeeded")
	}
	if _, err := s.AppendEvents(id, []event.Event{huge}); err == nil {
		t.Fatal("AppendEvents with an oversized event succeeded")
	}
	// Nothing changed: no checkpoint, no event, no task.
	restoreEquals(t, s, want)
	if got, err := s.Index(id); err != nil || !reflect.DeepEqual(got, idx) {
		t.Fatalf("index after refused input: %+v, %v; was %+v", got, err, idx)
	}
	if got := logOf(t, s, id, 0); !reflect.DeepEqual(got, []string{"1:a"}) {
		t.Fatalf("log after refused input: %v", got)
	}
	if got, err := s.Task(id); err != nil || string(got) != `{"v":1}` {
		t.Fatalf("task after refused input: %q, %v", got, err)
	}
	// The next accepted checkpoint and event take the next numbers.
	cp := persist(t, s, &next, store.Extras{Events: []event.Event{warning(id, "b")}})
	if cp.Seq != 2 || cp.Events[0].N != 2 {
		t.Fatalf("after refused input: checkpoint %d, event %d; want 2 and 2", cp.Seq, cp.Events[0].N)
	}
	// Refused input for a harness the store does not hold leaves it unknown.
	fresh := warning("fresh", "x")
	if _, err := s.PersistWith(newState(r, "fresh"), store.Extras{Events: []event.Event{fresh, other}}); err == nil {
		t.Fatal("PersistWith of a new harness with another harness's event succeeded")
	}
	_, err = s.Restore("fresh")
	wantNotFound(t, "Restore after a refused first checkpoint", err)
	_, err = s.Index("fresh")
	wantNotFound(t, "Index after a refused first checkpoint", err)
	if got := logOf(t, s, "fresh", 0); len(got) != 0 {
		t.Fatalf("log after a refused first checkpoint: %v", got)
	}
}

// A state that cannot be encoded (here: an unknown status) is refused and changes nothing.
func testRefusedState(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(12, 12))
	st := newState(r, "badstate")
	id := st.HarnessID
	bad := canonical(t, st)
	bad.Status = "bogus"
	x := store.Extras{Events: []event.Event{warning(id, "a")}, Task: []byte(`{}`)}
	if _, err := s.PersistWith(bad, x); err == nil {
		t.Fatal("a state with an unknown status was persisted")
	}
	_, err := s.Restore(id)
	wantNotFound(t, "Restore after a refused first state", err)
	_, err = s.Index(id)
	wantNotFound(t, "Index after a refused first state", err)
	_, err = s.Task(id)
	wantNotFound(t, "Task after a refused first state", err)
	if got := logOf(t, s, id, 0); len(got) != 0 {
		t.Fatalf("log after a refused first state: %v", got)
	}
	if ids := listIDs(t, s); len(ids) != 0 {
		t.Fatalf("List after a refused first state: %v", ids)
	}
	persist(t, s, st, store.Extras{})
	if _, err := s.PersistWith(bad, x); err == nil {
		t.Fatal("a state with an unknown status was persisted")
	}
	restoreEquals(t, s, st)
	if e, err := s.Index(id); err != nil || e.HeadSeq != 1 || e.Status != st.Status {
		t.Fatalf("index after a refused state: %+v, %v", e, err)
	}
	if got := logOf(t, s, id, 0); len(got) != 0 {
		t.Fatalf("log after a refused state: %v", got)
	}
	advance(r, st)
	if cp := persist(t, s, st, store.Extras{}); cp.Seq != 2 {
		t.Fatalf("checkpoint after a refused state has seq %d, want 2", cp.Seq)
	}
	restoreEquals(t, s, st)
}

func testUnknown(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(13, 13))
	persist(t, s, newState(r, "known"), store.Extras{Task: []byte(`{}`), Events: []event.Event{warning("known", "x")}})
	for _, id := range []string{"unknown", "known2", "KNOWN"} {
		_, err := s.Restore(id)
		wantNotFound(t, "Restore of "+id, err)
		_, err = s.Index(id)
		wantNotFound(t, "Index of "+id, err)
		_, err = s.Task(id)
		wantNotFound(t, "Task of "+id, err)
		wantNotFound(t, "Delete of "+id, s.Delete(id))
		if got := logOf(t, s, id, 0); len(got) != 0 {
			t.Fatalf("events of %s: %v", id, got)
		}
		s.Release(id)
	}
}

func testDelete(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(14, 14))
	a, b := newState(r, "del-a"), newState(r, "del-b")
	for range 3 {
		for _, st := range []*statefmt.HarnessState{a, b} {
			advance(r, st)
			persist(t, s, st, store.Extras{Task: []byte(`{"id":"` + st.HarnessID + `"}`), Events: []event.Event{warning(st.HarnessID, "e")}})
		}
	}
	if _, err := s.AppendEvents(a.HarnessID, []event.Event{warning(a.HarnessID, "late")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(a.HarnessID); err != nil {
		t.Fatal(err)
	}
	_, err := s.Restore(a.HarnessID)
	wantNotFound(t, "Restore after Delete", err)
	_, err = s.Index(a.HarnessID)
	wantNotFound(t, "Index after Delete", err)
	_, err = s.Task(a.HarnessID)
	wantNotFound(t, "Task after Delete", err)
	wantNotFound(t, "Delete again", s.Delete(a.HarnessID))
	if got := logOf(t, s, a.HarnessID, 0); len(got) != 0 {
		t.Fatalf("events after Delete: %v", got)
	}
	if ids := listIDs(t, s); !reflect.DeepEqual(ids, []string{b.HarnessID}) {
		t.Fatalf("List after Delete: %v", ids)
	}
	// The other harness is untouched.
	restoreEquals(t, s, b)
	if got := logOf(t, s, b.HarnessID, 0); len(got) != 3 {
		t.Fatalf("the other harness's log: %v", got)
	}
	if got, err := s.Task(b.HarnessID); err != nil || string(got) != `{"id":"del-b"}` {
		t.Fatalf("the other harness's task: %q, %v", got, err)
	}
	// The id can be used again, from the start.
	fresh := newState(r, a.HarnessID)
	cp := persist(t, s, fresh, store.Extras{Events: []event.Event{warning(a.HarnessID, "again")}})
	if cp.Seq != 1 || cp.Events[0].N != 1 {
		t.Fatalf("after Delete: checkpoint %d, event %d; want 1 and 1", cp.Seq, cp.Events[0].N)
	}
	restoreEquals(t, s, fresh)
	_, err = s.Task(a.HarnessID)
	wantNotFound(t, "Task of a re-created harness persisted without one", err)
}

func testRelease(t *testing.T, s Store) {
	r := rand.New(rand.NewPCG(15, 15))
	st := stategen.Reference(r, 30_000)
	id := st.HarnessID
	for range 3 {
		advance(r, st)
		persist(t, s, st, store.Extras{Task: []byte(`{}`), Events: []event.Event{warning(id, "e")}})
	}
	idx, _ := s.Index(id)
	s.Release(id)
	restoreEquals(t, s, st)
	s.Release(id)
	s.Release(id)
	if got, err := s.Index(id); err != nil || !reflect.DeepEqual(got, idx) {
		t.Fatalf("Index after Release: %+v, %v; was %+v", got, err, idx)
	}
	// The chain and the log go on where they were.
	advance(r, st)
	cp := persist(t, s, st, store.Extras{Events: []event.Event{warning(id, "after")}})
	if cp.Seq != 4 || cp.Events[0].N != 4 {
		t.Fatalf("after Release: checkpoint %d, event %d; want 4 and 4", cp.Seq, cp.Events[0].N)
	}
	s.Release(id)
	if n, err := s.AppendEvents(id, []event.Event{warning(id, "appended")}); err != nil || n != 5 {
		t.Fatalf("AppendEvents after Release: %d, %v; want 5", n, err)
	}
	restoreEquals(t, s, st)
	if _, err := s.Task(id); err != nil {
		t.Fatalf("Task after Release: %v", err)
	}
}

func testConcurrentPersist(t *testing.T, s Store) {
	const workers, steps = 6, 8
	states := make([]*statefmt.HarnessState, workers)
	for w := range workers {
		states[w] = newState(rand.New(rand.NewPCG(16, uint64(w))), fmt.Sprintf("conc-%d", w))
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // readers alongside: list, restore, index, events, release
		defer readers.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.List(); err != nil {
				t.Errorf("List: %v", err)
				return
			}
			id := fmt.Sprintf("conc-%d", i%workers)
			if _, err := s.Restore(id); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Restore %s: %v", id, err)
				return
			}
			if _, err := s.Index(id); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Index %s: %v", id, err)
				return
			}
			if err := s.Events(id, 0, func(event.Event) bool { return true }); err != nil {
				t.Errorf("Events %s: %v", id, err)
				return
			}
			if i%7 == 0 {
				s.Release(id)
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(17, uint64(w)))
			st := states[w]
			for i := 1; i <= steps; i++ {
				advance(r, st)
				cp, err := s.PersistWith(st, store.Extras{Events: []event.Event{warning(st.HarnessID, fmt.Sprint(i))},
					Task: []byte(fmt.Sprintf(`{"w":%d}`, w))})
				if err != nil {
					t.Errorf("PersistWith %s: %v", st.HarnessID, err)
					return
				}
				if cp.Seq != uint64(i) || cp.Events[0].N != uint64(i) {
					t.Errorf("%s: checkpoint %d has seq %d and event %d", st.HarnessID, i, cp.Seq, cp.Events[0].N)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	readers.Wait()
	if t.Failed() {
		return
	}
	if ids := listIDs(t, s); len(ids) != workers {
		t.Fatalf("List after concurrent persists: %v", ids)
	}
	for w, st := range states {
		restoreEquals(t, s, st)
		if e, err := s.Index(st.HarnessID); err != nil || e.HeadSeq != steps {
			t.Fatalf("Index %s: %+v, %v", st.HarnessID, e, err)
		}
		if got := logOf(t, s, st.HarnessID, 0); len(got) != steps || got[steps-1] != fmt.Sprintf("%d:%d", steps, steps) {
			t.Fatalf("log of %s: %v", st.HarnessID, got)
		}
		if got, err := s.Task(st.HarnessID); err != nil || string(got) != fmt.Sprintf(`{"w":%d}`, w) {
			t.Fatalf("Task of %s: %q, %v", st.HarnessID, got, err)
		}
	}
}

func testConcurrentAppend(t *testing.T, s Store) {
	const workers, each = 5, 6
	r := rand.New(rand.NewPCG(18, 18))
	st := newState(r, "append")
	id := st.HarnessID
	persist(t, s, st, store.Extras{})
	var wg sync.WaitGroup
	firsts := make([][]uint64, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n, err := s.AppendEvents(id, []event.Event{warning(id, fmt.Sprintf("%d.%d", w, i)), warning(id, "pair")})
				if err != nil {
					t.Errorf("AppendEvents: %v", err)
					return
				}
				firsts[w] = append(firsts[w], n)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Every append got its own two numbers, and the log holds each pair together.
	var all []uint64
	for _, f := range firsts {
		all = append(all, f...)
	}
	slices.Sort(all)
	for i, n := range all {
		if n != uint64(2*i+1) {
			t.Fatalf("first numbers of concurrent appends: %v", all)
		}
	}
	log := logOf(t, s, id, 0)
	if len(log) != 2*workers*each {
		t.Fatalf("log has %d events, want %d", len(log), 2*workers*each)
	}
	for i := 1; i < len(log); i += 2 {
		if log[i] != fmt.Sprintf("%d:pair", i+1) {
			t.Fatalf("event %d is %q: an append was split", i+1, log[i])
		}
	}
}
