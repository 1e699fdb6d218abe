package store_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
)

// A JSON state keeps a harness's place in its family. Replacing a sub-agent's state with one
// that names another parent, or none, is refused (the family would no longer hang together,
// and its export --chain would be refused from then on), and so is a new sub-agent's state
// whose parent the store does not hold or does not list it. Parents first, a family's states
// import one by one into a family that exports whole.
func TestImportedStateKeepsItsPlaceInAFamily(t *testing.T) {
	adir := t.TempDir()
	a := open(t, adir)
	family(t, a, 3)
	states := map[string]*statefmt.HarnessState{}
	for _, id := range []string{"quick", "quick.sub", "quick.sub.deep"} {
		st, err := a.Restore(id)
		if err != nil {
			t.Fatal(err)
		}
		states[id] = st
	}
	a.Close()
	before := dump(t, adir)
	with := func(id, parent string) *statefmt.HarnessState {
		st := clone(t, states[id])
		st.ParentHarnessID = parent
		return st
	}
	for _, c := range []struct {
		st   *statefmt.HarnessState
		want string
	}{
		{with("quick.sub", ""), "harness quick.sub is a sub-agent of quick, this state says it is no sub-agent"},
		{with("quick.sub", "quick.sub.deep"), "harness quick.sub is a sub-agent of quick, this state says it is a sub-agent of quick.sub.deep"},
		{with("quick", "quick.sub"), "harness quick is no sub-agent, this state says it is a sub-agent of quick.sub"},
	} {
		a := open(t, adir)
		_, err := a.ImportState(c.st, true)
		a.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("replacing %s with parent %q: %v, want %q", c.st.HarnessID, c.st.ParentHarnessID, err, c.want)
		}
		if after := dump(t, adir); !reflect.DeepEqual(after, before) {
			t.Fatalf("the refused replace of %s changed the store", c.st.HarnessID)
		}
	}

	b := open(t, t.TempDir())
	defer b.Close()
	if _, err := b.ImportState(states["quick.sub"], false); err == nil || !strings.Contains(err.Error(), "harness quick.sub is a sub-agent of quick, which this store does not hold: a sub-agent moves with its parent: `export quick --chain`") {
		t.Fatalf("a sub-agent's state alone: %v", err)
	}
	if ls, err := b.List(); err != nil || len(ls) != 0 {
		t.Fatalf("the refused import left %v (%v)", ls, err)
	}
	lonely := clone(t, states["quick"])
	lonely.SubAgentIDs = nil
	if _, err := b.ImportState(lonely, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ImportState(states["quick.sub"], false); err == nil || !strings.Contains(err.Error(), "whose state here does not list it") {
		t.Fatalf("a sub-agent's state under a parent that does not list it: %v", err)
	}
	if _, err := b.ImportState(states["quick"], true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"quick.sub", "quick.sub.deep"} {
		if _, err := b.ImportState(states[id], false); err != nil {
			t.Fatalf("%s after its parent: %v", id, err)
		}
	}
	var buf bytes.Buffer
	if sum, err := b.Export("quick", &buf); err != nil || len(sum.Harnesses) != 3 {
		t.Fatalf("export of the family imported state by state: %+v, %v", sum, err)
	}
	noProblems(t, b)
}

// A JSON state that lists, as its sub-agent, a harness the store holds in another family (or
// as a family's root) is refused, new or replacing: the harness would be claimed twice, and no
// export --chain of either family would be taken. The store is left as it was.
func TestImportedStateCannotClaimAnotherFamilysHarness(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	family(t, s, 3)
	member(t, s, "other", "", nil, statefmt.StatusPaused, 2)
	quick, err := s.Restore("quick")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	before := dump(t, dir)
	claims := clone(t, quick)
	claims.SubAgentIDs = append(claims.SubAgentIDs, "other")
	stranger := clone(t, quick)
	stranger.HarnessID, stranger.SubAgentIDs = "stranger", []string{"quick.sub"}
	for _, c := range []struct {
		st      *statefmt.HarnessState
		replace bool
		want    string
	}{
		{claims, true, "harness quick lists sub-agent other, which is no sub-agent in this store"},
		{stranger, false, "harness stranger lists sub-agent quick.sub, which is a sub-agent of quick in this store"},
	} {
		s := open(t, dir)
		_, err := s.ImportState(c.st, c.replace)
		s.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s listing %v: %v, want %q", c.st.HarnessID, c.st.SubAgentIDs, err, c.want)
		}
		if after := dump(t, dir); !reflect.DeepEqual(after, before) {
			t.Fatalf("the refused import of %s changed the store", c.st.HarnessID)
		}
	}
}
