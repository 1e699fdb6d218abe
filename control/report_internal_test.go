package control

import (
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
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
