package store_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// A named checkpoint outlives the chain records it was taken from: once a keyframe releases
// them, RestoreAt cannot reach the old sequence number, and RestoreNamed still gives the state
// (across a reopen). Names are checked, taken names refused, and deleting the harness deletes
// its named checkpoints.
func TestNamedCheckpointOutlivesTheChainsRetention(t *testing.T) {
	e, _ := bridge.Load()
	dir := t.TempDir()
	policy := bridge.ChainPolicy{MaxReplay: 5}
	s := openStore(t, dir, e, policy)
	defer func() { s.Close() }()
	r := rand.New(rand.NewPCG(3, 3))
	st := stategen.Reference(r, 10_000)
	for range 3 {
		step(r, st)
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
	}
	kept := clone(t, st)
	ev := event.Event{Type: event.Course, HarnessID: st.HarnessID, Action: "checkpoint", Message: "named early"}
	p, err := s.SaveNamed(st.HarnessID, "early", 3, st.UpdatedAt, kept, []event.Event{ev})
	if err != nil || p.Seq != 3 || p.Name != "early" {
		t.Fatalf("save: %+v %v", p, err)
	}
	if _, err := s.SaveNamed(st.HarnessID, "early", 3, st.UpdatedAt, kept, nil); !errors.Is(err, store.ErrNameTaken) {
		t.Fatalf("a taken name: %v", err)
	}
	for _, bad := range []string{"", "42", "a/b", "-x"} {
		if _, err := s.SaveNamed(st.HarnessID, bad, 3, st.UpdatedAt, kept, nil); !errors.Is(err, store.ErrInvalidName) {
			t.Fatalf("name %q: %v", bad, err)
		}
	}
	for range 20 {
		step(r, st)
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
	}
	if first, err := s.FirstSeq(st.HarnessID); err != nil || first <= 3 {
		t.Fatalf("the chain still holds checkpoint 3 (first %d, %v): the test shows nothing", first, err)
	}
	if _, err := s.RestoreAt(st.HarnessID, 3); err == nil {
		t.Fatal("a released checkpoint restored")
	}
	s.Close()
	s = openStore(t, dir, e, policy)
	_, got, task, err := s.RestoreNamed(st.HarnessID, "early")
	if err != nil || !reflect.DeepEqual(got, kept) || len(task) != 0 {
		t.Fatalf("restore of the named checkpoint: %v", err)
	}
	if l, err := s.Named(st.HarnessID); err != nil || len(l) != 1 || l[0].Name != "early" {
		t.Fatalf("named: %+v %v", l, err)
	}
	// An unknown name is not found, and said so without "harness not found": the harness is.
	if _, _, _, err := s.RestoreNamed(st.HarnessID, "late"); !errors.Is(err, store.ErrNotFound) || err.Error() != `harness `+st.HarnessID+` has no checkpoint named "late"` {
		t.Fatalf("an unknown name: %v", err)
	}
	if probs, err := s.Verify(""); err != nil || len(probs) != 0 {
		t.Fatalf("verify: %v %v", probs, err)
	}
	if err := s.Delete(st.HarnessID); err != nil {
		t.Fatal(err)
	}
	if l, err := s.Named(st.HarnessID); err != nil || len(l) != 0 {
		t.Fatalf("named checkpoints after delete: %+v %v", l, err)
	}
}
