package control

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// A restored state's strings point into the buffer of the whole state, so a report entry that
// kept one of them would keep the state: a report over thousands of harnesses held every one
// of them until it was done (70 MB for 3,000 small ones). The entry and the waiting gates copy
// their text.
func TestReportEntriesKeepNoPartOfTheStatesTheyCameFrom(t *testing.T) {
	seed, err := os.ReadFile("../statefmt/testdata/seed-example.json")
	if err != nil {
		t.Fatal(err)
	}
	st, err := statefmt.DecodeJSON(seed)
	if err != nil {
		t.Fatal(err)
	}
	st.StatusReason, st.Phase = "waiting for the night", "night"
	st.Gates = []statefmt.Gate{{ID: "g1", Kind: harness.GateStep, StepID: st.Plan.Steps[0].ID, Status: statefmt.GatePending, Reason: "critical", CreatedAt: st.CreatedAt}}
	buf, err := statefmt.EncodeBinary(st)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := statefmt.DecodeBinaryOwned(buf)
	if err != nil {
		t.Fatal(err)
	}
	inside := func(s string) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		return s != "" && p >= lo && p < lo+uintptr(len(buf))
	}
	if !inside(restored.HarnessID) {
		t.Fatal("the restored state's id is not in its buffer: the check below would prove nothing")
	}
	re := EntryOf(restored, nil)
	g := waitingGate(harness.PendingGate{HarnessID: restored.HarnessID, Gate: restored.Gates[0]})
	for name, s := range map[string]string{"id": re.ID, "agent": re.Agent, "task": re.Task, "reason": re.Reason, "phase": re.Phase,
		"failures": strings.Join(re.Failures, ""), "gate's harness": g.HarnessID, "gate": g.Gate, "gate's kind": g.Kind,
		"gate's step": g.StepID, "gate's reason": g.Why, "gate's wait": g.WaitsOn} {
		if s == "" && name != "failures" {
			t.Errorf("the entry's %s is empty", name)
		}
		if inside(s) {
			t.Errorf("the entry's %s %q points into the restored state's buffer", name, s)
		}
	}
}

// A report reads again only the harnesses that checkpointed since the last one (a daemon's
// metrics ask for it every few seconds): an unchanged harness's entry comes from the cache, a
// harness with a new checkpoint, a harness deleted and made again under the same id at the
// same sequence number, and a deleted harness are seen as they are now.
func TestReportReadsAgainOnlyTheHarnessesThatMoved(t *testing.T) {
	db, err := store.OpenStore(filepath.Join(t.TempDir(), "store"), store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := Local(db)
	r := rand.New(rand.NewPCG(3, 3))
	states := map[string]*statefmt.HarnessState{}
	persist := func(id string, at time.Time) {
		st := states[id]
		if st == nil {
			st = stategen.Reference(r, 0)
			st.HarnessID, st.CreatedAt, st.Status = id, at, statefmt.StatusCompleted
			states[id] = st
		}
		st.CheckpointCount++
		st.UpdatedAt = at
		statefmt.Normalize(st)
		if _, err := db.Persist(st); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(rep *Report, id string) *ReportEntry {
		for i := range rep.Harnesses {
			if rep.Harnesses[i].ID == id {
				return &rep.Harnesses[i]
			}
		}
		return nil
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, id := range []string{"a", "b", "c"} {
		persist(id, now)
	}
	rep, err := s.Report(context.Background(), 0)
	if err != nil || len(rep.Harnesses) != 3 {
		t.Fatalf("report: %v, %+v", err, rep)
	}
	// Mark every cached entry, so that an entry read again shows.
	for id, c := range s.reports.entries {
		c.entry.Agent = "from the cache"
		s.reports.entries[id] = c
	}
	persist("a", now.Add(time.Second))
	if err := db.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete("c"); err != nil {
		t.Fatal(err)
	}
	delete(states, "c")
	persist("c", now.Add(2*time.Second)) // a new harness c, at the same sequence number
	persist("d", now)
	rep, err = s.Report(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := entry(rep, "a"); e == nil || e.Agent != "MARS" || e.Checkpoints != 2 {
		t.Fatalf("a, which checkpointed again: %+v", e)
	}
	if e := entry(rep, "b"); e != nil {
		t.Fatalf("b, deleted, is in the report: %+v", e)
	}
	if e := entry(rep, "c"); e == nil || e.Agent != "MARS" || !e.CreatedAt.Equal(now.Add(2*time.Second)) {
		t.Fatalf("c, made again: %+v", e)
	}
	if _, ok := s.reports.entries["b"]; ok {
		t.Fatal("the cache still holds b, deleted")
	}
	// And an unchanged harness comes from the cache.
	for id, c := range s.reports.entries {
		c.entry.Agent = "from the cache"
		s.reports.entries[id] = c
	}
	rep, err = s.Report(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Harnesses {
		if e.Agent != "from the cache" {
			t.Fatalf("%s, unchanged, was read again", e.ID)
		}
	}
}

// A daemon asked only for reports over a window (the last hour, say) forgets the lines of the
// harnesses deleted since, and keeps those of harnesses outside the window for a longer one.
func TestAReportOverAWindowForgetsDeletedHarnesses(t *testing.T) {
	db, err := store.OpenStore(filepath.Join(t.TempDir(), "store"), store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := Local(db)
	r := rand.New(rand.NewPCG(5, 5))
	now := time.Now().UTC()
	for id, at := range map[string]time.Time{"old": now.Add(-48 * time.Hour), "new": now, "gone": now} {
		st := stategen.Reference(r, 0)
		st.HarnessID, st.CreatedAt, st.UpdatedAt, st.Status = id, at, at, statefmt.StatusCompleted
		st.CheckpointCount = 1
		statefmt.Normalize(st)
		if _, err := db.Persist(st); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Report(context.Background(), 0); err != nil || len(s.reports.entries) != 3 {
		t.Fatalf("report over everything: %v, %d cached", err, len(s.reports.entries))
	}
	if err := db.Delete("gone"); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Report(context.Background(), time.Hour)
	if err != nil || len(rep.Harnesses) != 1 || rep.Harnesses[0].ID != "new" {
		t.Fatalf("report over the last hour: %v, %+v", err, rep)
	}
	if _, ok := s.reports.entries["gone"]; ok {
		t.Error("the cache still holds a deleted harness's line after a report over a window")
	}
	if _, ok := s.reports.entries["old"]; !ok {
		t.Error("the cache forgot the line of a harness outside the window, still in the store")
	}
}

// A report entry carries the harness's budget under the names the state's JSON gives it, so
// that the console's list shows budget use on every card without reading each state.
func TestReportEntryCarriesTheBudgetAsTheStateNamesIt(t *testing.T) {
	st := stategen.Reference(rand.New(rand.NewPCG(9, 9)), 0)
	st.Budget = &statefmt.Budget{ToolCalls: 10, Tokens: 1000, TokensUsed: 5, WallClock: 2 * time.Second, WallClockUsed: 1500 * time.Millisecond, CostMicroUSD: 3}
	entry, err := json.Marshal(EntryOf(st, nil).Budget)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := statefmt.EncodeJSON(st)
	if err != nil {
		t.Fatal(err)
	}
	var fromState struct{ Budget map[string]any }
	var fromEntry map[string]any
	if err := json.Unmarshal(whole, &fromState); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(entry, &fromEntry); err != nil {
		t.Fatal(err)
	}
	for k, v := range fromEntry {
		if fromState.Budget[k] != v {
			t.Errorf("the entry's budget %s is %v, the state's %v", k, v, fromState.Budget[k])
		}
	}
	if len(fromEntry) != 5 {
		t.Errorf("the entry's budget: %s", entry)
	}
}
