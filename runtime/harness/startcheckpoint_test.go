package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/harness"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// A step that ends at once writes its start and its outcome in one checkpoint; a step that
// runs past the start delay has its start checkpointed while it runs, so the store (and
// `show`) says it is running.
func TestStartIsCheckpointedWithTheOutcomeUnlessTheStepRunsLong(t *testing.T) {
	// The wall clock: with the fake one, the slow step's sleep would pass at once and race the
	// timer that writes the start.
	e := newEnv(t)
	e.m = harness.NewManager(e.store, harness.Options{Clock: clock.RealClock{}, Sinks: []event.Sink{e.rec},
		StartCheckpoint: 20 * time.Millisecond})
	h, err := e.m.Create(parseTask(t, `id: starts
agent: A
workspace: .
agents:
  A:
    driver: script
    script:
      steps:
        quick: [{output: done}]
        slow: [{sleep: 2s}, {output: done}]
plan:
  - {id: quick, description: quick, agent: A}
  - {id: slow, description: slow, agent: A, dependsOn: [quick]}
`))
	if err != nil {
		t.Fatal(err)
	}
	var seenRunning bool
	e.rec.hook = func(ev event.Event) {
		if ev.Type == event.StepStarted && ev.StepID == "slow" {
			st, err := e.store.Restore(h.ID())
			seenRunning = err == nil && st.Plan.Steps[1].Status == statefmt.StepRunning
		}
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !seenRunning {
		t.Fatal("the slow step's start was not in the store while it ran")
	}
	// Checkpoints between each step's start and its outcome.
	between := map[string]int{}
	var open string
	for _, ev := range e.rec.events {
		switch ev.Type {
		case event.StepStarted:
			open = ev.StepID
		case event.StepCompleted:
			open = ""
		case event.Checkpoint:
			if open != "" {
				between[open]++
			}
		}
	}
	if between["quick"] != 0 || between["slow"] != 1 {
		t.Fatalf("checkpoints between start and outcome: %v; want none for the quick step, one for the slow", between)
	}
}
