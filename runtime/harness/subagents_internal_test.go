package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
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

// A child's task keeps, of each script, only what its plan can reach: the actions of its own
// steps (and of the steps of the script plans it delegates to), the "*" actions, and the plans
// a delegation runs. So a plan that delegates its N steps does not store N copies of an N-step
// script: the children's stored tasks stay the same size however long the parent's plan.
func TestAChildsTaskCarriesOnlyTheScriptsItsPlanReaches(t *testing.T) {
	var b strings.Builder
	b.WriteString(`id: big
agent: MAIN
autonomy: 5
agents:
  MAIN:
    driver: script
    script:
      plan:
        - {id: nest, description: nested work, agent: NEST}
`)
	const n = 120
	for i := range n {
		fmt.Fprintf(&b, "        - {id: s%d, description: part %d, agent: HELP}\n", i, i)
	}
	b.WriteString(`      steps: {"*": [{output: main}]}
  NEST:
    driver: script
    script:
      plan:
        - {id: n1, description: inner, agent: HELP}
        - {id: n2, description: own, agent: NEST, dependsOn: [n1]}
      steps: {n2: [{output: nested}], unused: [{output: never}]}
  HELP:
    driver: script
    script:
      steps:
        "*": [{output: any}]
        n1: [{output: inner}]
`)
	for i := range n {
		fmt.Fprintf(&b, "        s%d: [{output: \"part %d done\"}]\n", i, i)
	}
	s, err := store.OpenStore(filepath.Join(t.TempDir(), "store"), store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := NewManager(s, Options{})
	tk, err := task.Parse("t.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	tk.Workspace.Path = t.TempDir()
	h, err := m.Create(tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted {
		t.Fatalf("%s (%s)", st.Status, st.StatusReason)
	}
	for i, step := range st.Plan.Steps[1:] {
		if want := fmt.Sprintf("part %d done", i); step.Output == nil || *step.Output != want {
			t.Fatalf("step %s output %v, want %q", step.ID, step.Output, want)
		}
	}
	stored := func(id string) *task.Task {
		t.Helper()
		raw, err := s.Task(id)
		if err != nil {
			t.Fatal(err)
		}
		var c task.Task
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	steps := func(a *task.Agent) []string {
		return slices.Sorted(maps.Keys(a.Script.Steps))
	}
	first, last := stored(childID("big", "s0", 1)), stored(childID("big", fmt.Sprintf("s%d", n-1), 1))
	if got := steps(first.Agents["HELP"]); !slices.Equal(got, []string{"*", "s0"}) {
		t.Fatalf("the first child's HELP script has the actions of %v", got)
	}
	if p := first.Agents["MAIN"].Script; len(p.Plan) != 0 || len(p.Steps) != 0 || len(first.Agents["NEST"].Script.Plan) != 0 {
		t.Fatalf("the first child carries scripts it never runs: MAIN %+v, NEST %+v", p, first.Agents["NEST"].Script)
	}
	a, _ := json.Marshal(first)
	z, _ := json.Marshal(last)
	if len(z) > len(a)+16 {
		t.Fatalf("the last child's task is %d bytes, the first's %d: it grows with the parent's plan", len(z), len(a))
	}
	nest := stored(childID("big", "nest", 1))
	if len(nest.Agents["NEST"].Script.Plan) != 2 || !slices.Equal(steps(nest.Agents["NEST"]), []string{"n2"}) ||
		!slices.Equal(steps(nest.Agents["HELP"]), []string{"*", "n1"}) {
		t.Fatalf("the nested child's scripts: NEST %+v, HELP %v", nest.Agents["NEST"].Script, steps(nest.Agents["HELP"]))
	}
	if out := st.Plan.Steps[0].Output; out == nil || *out != "nested" {
		t.Fatalf("the nested step's output %v", out)
	}
	inner := stored(childID(childID("big", "nest", 1), "n1", 1))
	if !slices.Equal(steps(inner.Agents["HELP"]), []string{"*", "n1"}) || len(inner.Agents["NEST"].Script.Plan) != 0 {
		t.Fatalf("the grandchild's scripts: HELP %v, NEST %+v", steps(inner.Agents["HELP"]), inner.Agents["NEST"].Script)
	}
	if orig := tk.Agents["HELP"].Script.Steps; len(orig) != n+2 {
		t.Fatalf("the parent's task lost actions: %d", len(orig))
	}
}
