package harness_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// A replan that makes a step waiting at its gate depend on a new step supersedes the gate: the
// new step runs first on resume, and the gate is asked again when the step is ready.
func TestAReplanBeforeAGatedStepAsksTheGateAgainWhenTheStepIsReady(t *testing.T) {
	e := newEnv(t)
	h := pausedBeforeShip(t, e, "gr")
	change := "insert:\n  - {id: check, description: check the build, agent: A, dependsOn: [build], actions: [{output: checked}]}\ndependsOn:\n  ship: [check]\n"
	if _, err := e.m.Replan("gr", "check.yaml", []byte(change), "ada", "check first"); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if len(st.Gates) != 1 || st.Gates[0].Status != statefmt.GateRejected || !strings.Contains(st.Gates[0].Reason, "superseded by a replan") {
		t.Fatalf("the gate before ship after the replan: %+v", st.Gates)
	}
	h, err := e.m.ResumeFromCheckpoint("gr")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err == nil || h.Status() != statefmt.StatusPaused {
		t.Fatalf("resume: %v, %s; want paused at a new gate before ship", err, h.Status())
	}
	st = h.State()
	check := st.Plan.Steps[2]
	if check.ID != "check" || check.Status != statefmt.StepCompleted || *check.Output != "checked" {
		t.Fatalf("the inserted step did not run first: %+v", check)
	}
	if len(st.Gates) != 2 || st.Gates[1].StepID != "ship" || st.Gates[1].Status != statefmt.GatePending {
		t.Fatalf("no new gate before ship: %+v", st.Gates)
	}
	if _, err := e.m.Decide("gr", "", true, "checked"); err != nil {
		t.Fatal(err)
	}
	if h, err = e.m.ResumeFromCheckpoint("gr"); err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
		t.Fatalf("resume after approval: %v, %s", err, h.Status())
	}
	var superseded int
	for _, ev := range e.rec.of(event.Gate) {
		if ev.Action == "rejected" && strings.Contains(ev.Reason, "superseded by a replan") {
			superseded++
		}
	}
	if superseded != 1 {
		t.Fatalf("%d gate events say the replan superseded the gate, want 1", superseded)
	}
}

// retry --step of the step a gate waits before says to decide the gate, not to resume (which
// the gate refuses).
func TestRetryOfAStepAtAGateSaysToDecideTheGate(t *testing.T) {
	e := newEnv(t)
	pausedBeforeShip(t, e, "rg")
	_, err := e.m.Retry("rg", "ship", "ada", "")
	if err == nil || !strings.Contains(err.Error(), "gate g1 before step ship waits for a human: `harness-edge approve rg` (or reject), then `harness-edge resume rg`") {
		t.Fatalf("retry --step ship at its gate: %v", err)
	}
}

// pausedBeforeShip runs a harness of two steps, build and the critical ship, at autonomy 3, to
// its gate before ship.
func pausedBeforeShip(t *testing.T, e *env, id string) *harness.Harness {
	t.Helper()
	return pausedBeforeShipDoing(t, e, id, "[{output: done}]")
}

// pausedBeforeShipDoing is pausedBeforeShip with each step's actions given.
func pausedBeforeShipDoing(t *testing.T, e *env, id, actions string) *harness.Harness {
	t.Helper()
	h, err := e.m.Create(parseTask(t, `id: `+id+`
agent: A
autonomy: 3
agents:
  A:
    driver: script
    script:
      plan:
        - {id: build, description: build it, agent: A}
        - {id: ship, description: ship it, agent: A, dependsOn: [build], critical: true}
      steps:
        "*": `+actions+`
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err == nil || h.Status() != statefmt.StatusPaused {
		t.Fatalf("run: %v, %s; want paused at the gate before ship", err, h.Status())
	}
	return h
}

// A replan that skips or replaces a delegated step whose sub-agent waits at a gate ends that
// sub-agent (its gate closed, and its own sub-agent ended with it): the parent resumes at once,
// and no harness is left waiting for a human over a step nobody will run. A replaced step gets
// a new sub-agent, of the agent the change names.
func TestAReplanOfADelegatedStepEndsTheSubAgentWaitingAtAGate(t *testing.T) {
	for _, c := range []struct{ name, change, output string }{
		{"skip", "skip: [n1]\n", "(skipped by ada: not needed)"},
		{"replace", "replace:\n  n1: {agent: B, actions: [{output: done by B}]}\n", "done by B"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			h, err := e.m.Create(parseTask(t, `id: p
agent: A
autonomy: 3
agents:
  A: {driver: script, script: {steps: {"*": [{output: a}]}}}
  B: {driver: script, script: {steps: {"*": [{output: b}]}}}
  N:
    driver: script
    script:
      plan:
        - {id: inner, description: inner, agent: B}
        - {id: own, description: own, agent: N, dependsOn: [inner], critical: true}
      steps: {"*": [{output: n}]}
plan:
  - {id: n1, description: nested, agent: N}
  - {id: last, description: last, agent: A, dependsOn: [n1]}
`))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); err == nil || h.Status() != statefmt.StatusPaused {
				t.Fatalf("run: %v %s; want paused at the sub-agent's gate", err, h.Status())
			}
			res, err := e.m.Replan("p", "c.yaml", []byte(c.change), "ada", "not needed")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Superseded) != 1 || res.Superseded[0] != "p.n1" {
				t.Fatalf("superseded %v", res.Superseded)
			}
			child, err := e.m.Get("p.n1")
			if err != nil {
				t.Fatal(err)
			}
			if st := child.State(); st.Status != statefmt.StatusFailed || !strings.Contains(st.StatusReason, "superseded by a replan of p") ||
				len(st.Gates) != 1 || st.Gates[0].Status != statefmt.GateRejected {
				t.Fatalf("the sub-agent at the gate: %s (%s), gates %+v", st.Status, st.StatusReason, st.Gates)
			}
			if h, err = e.m.ResumeFromCheckpoint("p"); err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
				t.Fatalf("resume: %v %s", err, h.Status())
			}
			st := h.State()
			if out := st.Plan.Steps[0].Output; out == nil || *out != c.output {
				t.Fatalf("step n1's output %v, want %q", out, c.output)
			}
			if r := st.SubAgentResults["p.n1"]; r.Status != statefmt.StatusFailed {
				t.Fatalf("the parent's view of the superseded sub-agent: %+v", r)
			}
			e.open()
			for _, id := range []string{"p", "p.n1", "p.n1.inner"} {
				if _, err := e.store.Index(id); err != nil {
					t.Fatalf("%s: %v", id, err)
				}
			}
			list, err := e.store.List()
			if err != nil {
				t.Fatal(err)
			}
			for _, ie := range list {
				if ie.Status == statefmt.StatusPaused || ie.Status == statefmt.StatusRunning {
					t.Fatalf("harness %s is left %s", ie.ID, ie.Status)
				}
				if g, _ := e.m.PendingGates(ie.ID); len(g) > 0 {
					t.Fatalf("harness %s has pending gates %+v", ie.ID, g)
				}
			}
		})
	}
}

// dyingStore is a store whose process dies, as far as the store can tell, at the first
// checkpoint of a harness dies names: that checkpoint and every later one are never written.
type dyingStore struct {
	harness.Store
	dies string
	dead bool
}

func (d *dyingStore) PersistWith(st *statefmt.HarnessState, x store.Extras) (store.Checkpoint, error) {
	if d.dead || st.HarnessID == d.dies {
		d.dead = true
		return store.Checkpoint{}, errors.New("the process died")
	}
	return d.Store.PersistWith(st, x)
}

// A replan checkpoints the parent, then ends the sub-agents it superseded: a process that dies
// between the two, or between the end of a sub-agent and the end of its own, leaves one paused
// at a gate that its parent no longer looks at. The next resume of the parent ends it.
func TestAResumeEndsTheSubAgentsAReplanThatDiedLeftUnended(t *testing.T) {
	for _, dies := range []string{"p.n1", "p.n1.inner"} {
		t.Run(dies, func(t *testing.T) {
			e := newEnv(t)
			h, err := e.m.Create(parseTask(t, `id: p
agent: A
autonomy: 3
agents:
  A: {driver: script, script: {steps: {"*": [{output: a}]}}}
  N:
    driver: script
    script:
      plan:
        - {id: inner, description: inner, agent: M}
        - {id: own, description: own, agent: N, dependsOn: [inner]}
      steps: {"*": [{output: n}]}
  M:
    driver: script
    script:
      plan:
        - {id: m0, description: m zero, agent: M}
        - {id: g, description: gated, agent: M, critical: true, dependsOn: [m0]}
      steps: {"*": [{output: m}]}
plan:
  - {id: n1, description: nested, agent: N}
  - {id: last, description: last, agent: A, dependsOn: [n1]}
`))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); err == nil || h.Status() != statefmt.StatusPaused {
				t.Fatalf("run: %v %s; want paused at the grandchild's gate", err, h.Status())
			}
			dying := harness.NewManager(&dyingStore{Store: e.store, dies: dies}, harness.Options{Clock: e.clock, StartCheckpoint: -1})
			if _, err := dying.Replan("p", "c.yaml", []byte("skip: [n1]\n"), "ada", "not needed"); err == nil {
				t.Fatal("the replan went through a process that died")
			}
			e.open()
			if h, err = e.m.ResumeFromCheckpoint("p"); err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
				t.Fatalf("resume: %v %s", err, h.Status())
			}
			e.open()
			for _, id := range []string{"p.n1", "p.n1.inner"} {
				ie, err := e.store.Index(id)
				if err != nil {
					t.Fatal(err)
				}
				if ie.Status != statefmt.StatusFailed {
					t.Fatalf("sub-agent %s is left %s", id, ie.Status)
				}
				if g, _ := e.m.PendingGates(id); len(g) > 0 {
					t.Fatalf("sub-agent %s has pending gates %+v", id, g)
				}
			}
		})
	}
}

// The task output's duration is the time the harness ran: a night spent waiting at a gate for a
// human is not in it.
func TestTheOutputsDurationLeavesOutTheTimeAHarnessWaitedAtAGate(t *testing.T) {
	e := newEnv(t)
	pausedBeforeShipDoing(t, e, "night", "[{sleep: 2s}, {output: done}]")
	e.clock.Advance(8 * time.Hour)
	if _, err := e.m.Decide("night", "", true, "ship it"); err != nil {
		t.Fatal(err)
	}
	h, err := e.m.ResumeFromCheckpoint("night")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
		t.Fatalf("resume after approval: %v, %s", err, h.Status())
	}
	out := h.Output("harness")
	if ran := time.Duration(out.DurationMs * float64(time.Millisecond)); ran < 4*time.Second || ran > time.Minute {
		t.Fatalf("the output says the harness ran %s: its two steps slept 2 s each, and the 8 h at the gate are not running time", ran)
	}
	st := h.State()
	if wall := st.UpdatedAt.Sub(st.CreatedAt); wall < 8*time.Hour {
		t.Fatalf("the harness's life is %s: the test did not wait at the gate", wall)
	}
}

// A state that records no running time (one exported by another program, say) reports its whole
// life as its duration; one that does reports that.
func TestTheOutputsDurationOfAStateThatRecordsNoRunningTimeIsItsLife(t *testing.T) {
	created := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		budget *statefmt.Budget
		want   float64
	}{
		{nil, 5000},
		{&statefmt.Budget{ToolCalls: 10}, 5000},
		{&statefmt.Budget{ToolCalls: 10, WallClockUsed: 2 * time.Second}, 2000},
	} {
		st := &statefmt.HarnessState{TaskID: "t", HarnessID: "h", Status: statefmt.StatusCompleted, CreatedAt: created, UpdatedAt: created.Add(5 * time.Second), Budget: c.budget}
		if got := harness.OutputOf(st, "harness").DurationMs; got != c.want {
			t.Errorf("budget %+v: duration %v ms, want %v", c.budget, got, c.want)
		}
	}
}
