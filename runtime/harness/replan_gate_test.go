package harness_test

import (
	"context"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
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
        "*": [{output: done}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err == nil || h.Status() != statefmt.StatusPaused {
		t.Fatalf("run: %v, %s; want paused at the gate before ship", err, h.Status())
	}
	return h
}
