package harness

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Plans made at run time (by an agent, not the task file) cannot be checked at creation: a
// harness already at the maximum depth refuses to spawn, before any child exists, and the step
// fails with its dependents blocked.
func TestSpawnBeyondMaxDepthIsRefusedAtRunTime(t *testing.T) {
	s, err := store.OpenStore(filepath.Join(t.TempDir(), "store"), store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := NewManager(s, Options{})
	tk, err := task.Parse("t.yaml", []byte(`id: deep
agent: A
autonomy: 5
maxDepth: 2
agents:
  A: {driver: script, script: {steps: {"*": [{output: a}]}}}
  B: {driver: script, script: {steps: {"*": [{output: b}]}}}
plan:
  - {id: s1, description: delegated, agent: B}
  - {id: s2, description: after, agent: A, dependsOn: [s1]}
`))
	if err != nil {
		t.Fatal(err)
	}
	tk.Workspace.Path = t.TempDir()
	h, err := m.Create(tk)
	if err != nil {
		t.Fatal(err)
	}
	h.st.Depth = 2 // as if it were a grandchild
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusFailed || st.Plan.Steps[0].Status != statefmt.StepFailed ||
		!strings.Contains(*st.Plan.Steps[0].Error, "depth 3, above the maximum 2") || st.Plan.Steps[1].Status != statefmt.StepBlocked {
		t.Fatalf("%s (%s), steps %+v", st.Status, st.StatusReason, st.Plan.Steps)
	}
	if _, err := s.Index(childID("deep", "s1", 1)); !errors.Is(err, store.ErrNotFound) || len(st.SubAgentIDs) != 0 {
		t.Fatalf("a child was created: %v %v", err, st.SubAgentIDs)
	}
}

// An intent the step's re-run does not match (an agent that called something else this time)
// is not dropped silently: the step's end warns that the call may have run.
func TestUnmatchedIntentWarns(t *testing.T) {
	s, err := store.OpenStore(filepath.Join(t.TempDir(), "store"), store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var warnings []event.Event
	m := NewManager(s, Options{Sinks: []event.Sink{event.SinkFunc(func(e event.Event) {
		if e.Type == event.Warning && e.Tool != "" { // (the fallback backend adds one of its own)
			warnings = append(warnings, e)
		}
	})}})
	tk, err := task.Parse("t.yaml", []byte("id: w\nagent: A\nautonomy: 5\nagents:\n  A: {driver: script, script: {steps: {\"*\": [{output: a}]}}}\nplan:\n  - {id: s, description: x, agent: A}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tk.Workspace.Path = t.TempDir()
	h, err := m.Create(tk)
	if err != nil {
		t.Fatal(err)
	}
	h.st.SideEffects = []statefmt.SideEffect{{StepID: "s", Tool: "deploy", Arguments: statefmt.JSONValue(`{"v":1}`), Occurrence: 1}}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0].Message, `deploy {"v":1} may have run`) || len(h.State().SideEffects) != 0 {
		t.Fatalf("warnings %+v, journal %+v", warnings, h.State().SideEffects)
	}
}
