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
)

// A step that used up its automatic retries on transient failures fails the harness; a human's
// retry gives it its next attempt, which completes it.
func TestRetryGivesAFailedStepItsNextAttempt(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: tr
agent: A
retry: {maxRetries: 2, base: 1ms}
agents:
  A:
    driver: script
    script:
      plan:
        - {id: s1, description: flaky, agent: A}
      steps:
        s1: [{fail: transient, message: upstream down, times: 3}, {output: up}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	res, err := e.m.Retry("tr", "", "ada", "upstream is back")
	if err != nil || res.Status != statefmt.StatusPaused || len(res.Steps) != 1 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	h, err = e.m.ResumeFromCheckpoint("tr")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted || st.Plan.Steps[0].Attempts != 4 {
		t.Fatalf("status %s, attempts %d", st.Status, st.Plan.Steps[0].Attempts)
	}
	starts := e.rec.of(event.StepStarted)
	if last := starts[len(starts)-1]; last.Attempt != 4 {
		t.Fatalf("the retried attempt started as attempt %d", last.Attempt)
	}
	if c := e.rec.of(event.Course); len(c) != 1 || c[0].By != "ada" || c[0].Reason != "upstream is back" {
		t.Fatalf("course events: %+v", c)
	}
}

// A failed delegated step spawns new sub-agents when it is retried (each attempt of the step
// gets its own tries), and the failed ones stay listed.
func TestRetryOfADelegatedStepSpawnsNewSubAgents(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: dl
agent: A
agents:
  A: {driver: script, script: {}}
  B: {driver: script, script: {steps: {"*": [{fail: permanent, message: no luck}]}}}
plan:
  - {id: d, description: delegated, agent: B}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	if n := len(h.State().SubAgentIDs); n != harness.ChildTries {
		t.Fatalf("%d sub-agents after the first attempt", n)
	}
	if _, err := e.m.Retry("dl", "d", "ada", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Retry("dl.d", "", "ada", ""); !errors.Is(err, harness.ErrSubAgent) {
		t.Fatalf("retry of a sub-agent: %v", err)
	}
	h, err = e.m.ResumeFromCheckpoint("dl")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusFailed || len(st.SubAgentIDs) != 2*harness.ChildTries || st.Plan.Steps[0].Attempts != 2 {
		t.Fatalf("status %s, sub-agents %v, attempts %d", st.Status, st.SubAgentIDs, st.Plan.Steps[0].Attempts)
	}
}

// A harness running in this process is not retried, and the refusal changes nothing.
func TestRetryRefusesARunningHarness(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: busy
agent: A
agents:
  A:
    driver: script
    tools: [bash]
    script:
      plan:
        - {id: s, description: slow, agent: A}
      steps:
        s: [{tool: bash, args: {command: "sleep 0.5"}}, {fail: permanent, message: late}]
`))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(context.Background()) }()
	// Wait for the step's start to be stored: after it the harness writes nothing until the
	// half-second step ends, so any checkpoint in between would be the retry's.
	for {
		st, err := e.store.Restore("busy")
		if err == nil && h.Running() && st.Plan != nil && len(st.Plan.Steps) > 0 && st.Plan.Steps[0].Status == statefmt.StepRunning {
			break
		}
		time.Sleep(time.Millisecond)
	}
	before, _ := e.store.Index("busy")
	if _, err := e.m.Retry("busy", "", "ada", ""); !errors.Is(err, harness.ErrRunning) {
		t.Fatalf("retry of a running harness: %v", err)
	}
	if after, _ := e.store.Index("busy"); after.HeadSeq != before.HeadSeq {
		t.Fatal("a refused retry wrote a checkpoint")
	}
	if err := <-done; err != nil || h.Status() != statefmt.StatusFailed {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	if len(e.rec.of(event.Course)) != 0 {
		t.Fatal("a refused retry left an event")
	}
}

// A retry of a failed harness with no failed step left (a replan replaced the step that
// failed) keeps the plan as the replan left it: the result does not say it plans again, the
// course event and the status reason say the plan is kept, and resume runs the replaced step
// (not the steps done before it, nor a new plan).
func TestRetryAfterAReplanKeepsThePlanAndSaysSo(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: rp
agent: A
agents:
  A:
    driver: script
    script:
      plan:
        - {id: prep, description: prepare, agent: A}
        - {id: build, description: build it, agent: A, dependsOn: [prep]}
      steps:
        prep: [{output: ready}]
        build: [{fail: permanent, message: compiler not found}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	if _, err := e.m.Replan("rp", "fix.yaml", []byte("replace:\n  build: {actions: [{output: built}]}\n"), "ada", "another compiler"); err != nil {
		t.Fatal(err)
	}
	res, err := e.m.Retry("rp", "", "ada", "")
	if err != nil || res.Status != statefmt.StatusPaused || len(res.Steps) != 0 || res.PlansAgain {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if c := e.rec.of(event.Course); c[len(c)-1].Message != "no failed step; the plan is kept" {
		t.Fatalf("the retry's course event says %q", c[len(c)-1].Message)
	}
	if r := h.State().StatusReason; r != "retry (no failed step; the plan is kept) by ada; resume to run it" {
		t.Fatalf("status reason %q", r)
	}
	h, err = e.m.ResumeFromCheckpoint("rp")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted || len(st.Plan.Steps) != 2 || st.Plan.Steps[0].Attempts != 1 || *st.Plan.Steps[1].Output != "built" {
		t.Fatalf("status %s, plan %+v", st.Status, st.Plan.Steps)
	}
}

// A retry of a harness that failed before it had a plan (its agent could not plan) says that
// resume plans again.
func TestRetryOfAHarnessThatFailedPlanningSaysItPlansAgain(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: np
agent: A
agents:
  A: {driver: script, script: {steps: {"*": [{output: done}]}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed || h.State().Plan != nil {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	res, err := e.m.Retry("np", "", "ada", "")
	if err != nil || res.Status != statefmt.StatusPaused || len(res.Steps) != 0 || !res.PlansAgain {
		t.Fatalf("retry: %+v %v", res, err)
	}
}

// Stop, pause and resume of a failed harness are refused, changing nothing, with a message
// that says it has stopped and what takes it on; retry, which the message names, does.
func TestStopOfAFailedHarnessSaysItHasStoppedAndRetryTakesItOn(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: sf
agent: A
agents:
  A:
    driver: script
    script:
      plan:
        - {id: s1, description: fails once, agent: A}
      steps:
        s1: [{fail: permanent, message: broken, times: 1}, {output: fixed}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	before := h.State()
	var te *harness.TransitionError
	err = e.m.Stop("sf")
	if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), "harness sf is failed: it has stopped already; `harness-edge retry sf` makes it paused") {
		t.Fatalf("stop of a failed harness: %v", err)
	}
	err = e.m.Pause("sf", "")
	if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), "harness sf is failed: it cannot go to paused: it has stopped; `harness-edge retry sf`") {
		t.Fatalf("pause of a failed harness: %v", err)
	}
	if _, err = e.m.ResumeFromCheckpoint("sf"); !errors.As(err, &te) || !strings.Contains(err.Error(), "`harness-edge retry sf`") {
		t.Fatalf("resume of a failed harness: %v", err)
	}
	if after := h.State(); after.Status != statefmt.StatusFailed || after.CheckpointCount != before.CheckpointCount || after.StatusReason != before.StatusReason {
		t.Fatalf("a refusal changed the harness: %s (%s), %d checkpoints", after.Status, after.StatusReason, after.CheckpointCount)
	}
	if res, err := e.m.Retry("sf", "", "ada", ""); err != nil || res.Status != statefmt.StatusPaused {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if h, err = e.m.ResumeFromCheckpoint("sf"); err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
		t.Fatalf("resume after the retry: %v, %s", err, h.Status())
	}
	err = e.m.Stop("sf")
	if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), "harness sf is completed: it has stopped already; its plan is done: `harness-edge rollback sf --to NAME|SEQ`") {
		t.Fatalf("stop of a completed harness: %v", err)
	}
}

// retry --step of a step that has not failed says what takes the harness on: a step that
// completed beside a failed one points at the failed steps; one that waits on two failed steps
// names both; the refusal changes nothing.
func TestRetryOfAStepThatHasNotFailedPointsAtTheFailedOnes(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: two
agent: A
agents:
  A:
    driver: script
    script:
      plan:
        - {id: ok, description: fine, agent: A}
        - {id: x, description: breaks, agent: A, dependsOn: [ok]}
        - {id: y, description: breaks too, agent: A, dependsOn: [ok]}
        - {id: join, description: joins, agent: A, dependsOn: [x, y]}
      steps:
        ok: [{output: fine}]
        x: [{fail: permanent, message: broken}]
        y: [{fail: permanent, message: broken too}]
        join: [{output: joined}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	before := h.State()
	for step, want := range map[string]string{
		"ok":   "harness two: step ok is completed, not failed: nothing to retry; the failed steps are x, y: retry them all (`harness-edge retry two`), or one with --step",
		"join": "harness two: step join is blocked, not failed: nothing to retry; it waits on failed steps x, y: retry them all (`harness-edge retry two`), or one at a time with --step",
	} {
		_, err := e.m.Retry("two", step, "ada", "")
		if !errors.Is(err, harness.ErrNothingToRetry) || err.Error() != want {
			t.Errorf("retry --step %s: %v\nwant: %s", step, err, want)
		}
	}
	if after := h.State(); after.StatusReason != before.StatusReason || after.Plan.Steps[3].Status != statefmt.StepBlocked || len(e.rec.of(event.Course)) != 0 {
		t.Fatalf("a refused retry changed the harness: %q", after.StatusReason)
	}
}

// A replan of a harness that has completed is refused as a replan, not as a retry: the
// message says there is nothing to replan.
func TestReplanOfACompletedHarnessSaysNothingToReplan(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: done
agent: A
agents:
  A: {driver: script, script: {plan: [{id: s1, description: one, agent: A}], steps: {s1: [{output: ok}]}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	_, err = e.m.Replan("done", "skip.yaml", []byte("skip: [s1]\n"), "ada", "")
	if !errors.Is(err, harness.ErrNothingToReplan) || strings.Contains(err.Error(), "retry") {
		t.Fatalf("replan of a completed harness: %v", err)
	}
}

// A retry of a harness that waits at a gate, with nothing failed, names the gate and the
// commands that answer it, rather than a resume, which the gate would refuse.
func TestRetryAtAGateNamesTheGate(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: gated
agent: A
autonomy: 3
agents:
  A: {driver: script, script: {plan: [{id: ship, description: ship it, agent: A, critical: true}], steps: {ship: [{output: shipped}]}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); !errors.Is(err, harness.ErrWaiting) || h.Status() != statefmt.StatusPaused {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	_, err = e.m.Retry("gated", "", "ada", "")
	if !errors.Is(err, harness.ErrNothingToRetry) || !strings.Contains(err.Error(), "gate g1 before step ship waits for a human: `harness-edge approve gated`") {
		t.Fatalf("retry at a gate: %v", err)
	}
}
