package harness_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// When the first step of a 1,000-step chain fails, the messages (the status reason, the
// state_transition event, a retry's course event and status) name ten of the 999 steps it
// blocked and count the rest; the data (the step_failed event's blocked list, the plan's step
// statuses, the retry's result) keeps every one.
func TestAFailureEarlyInALongChainNamesTenBlockedStepsInMessages(t *testing.T) {
	e := newEnv(t)
	var plan strings.Builder
	for i := 1; i <= 1000; i++ {
		dep := ""
		if i > 1 {
			dep = fmt.Sprintf(", dependsOn: [s%05d]", i-1)
		}
		fmt.Fprintf(&plan, "        - {id: s%05d, description: step %d, agent: A%s}\n", i, i, dep)
	}
	h, err := e.m.Create(parseTask(t, `id: long
agent: A
autonomy: 5
agents:
  A:
    driver: script
    script:
      plan:
`+plan.String()+`      steps:
        s00001: [{fail: permanent, message: the file is outside the workspace}]
        "*": [{output: ok}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	const want = "step s00001 failed: the file is outside the workspace; blocked: s00002, s00003, s00004, s00005, s00006, s00007, s00008, s00009, s00010, s00011 and 989 more"
	st := h.State()
	if st.StatusReason != want {
		t.Fatalf("status reason (%d bytes):\n%.300s\nwant:\n%s", len(st.StatusReason), st.StatusReason, want)
	}
	var toFailed []event.Event
	for _, ev := range e.rec.of(event.StateTransition) {
		if ev.To == statefmt.StatusFailed {
			toFailed = append(toFailed, ev)
		}
	}
	if len(toFailed) != 1 || toFailed[0].Reason+toFailed[0].Message != want {
		t.Fatalf("state_transition to failed: %+v", toFailed)
	}
	failed := e.rec.of(event.StepFailed)
	if len(failed) != 1 || len(failed[0].Blocked) != 999 || failed[0].Blocked[998] != "s01000" || len(failed[0].Message) > 100 {
		t.Fatalf("step_failed: %d events, blocked %d, message %q", len(failed), len(failed[0].Blocked), failed[0].Message)
	}
	blocked := 0
	for _, s := range st.Plan.Steps {
		if s.Status == statefmt.StepBlocked {
			blocked++
		}
	}
	if blocked != 999 {
		t.Fatalf("%d steps blocked in the plan, want 999", blocked)
	}

	res, err := e.m.Retry("long", "", "ada", "moved the file")
	if err != nil || len(res.Unblocked) != 999 {
		t.Fatalf("retry: %d unblocked, %v", len(res.Unblocked), err)
	}
	const unblocked = "unblocked s00002, s00003, s00004, s00005, s00006, s00007, s00008, s00009, s00010, s00011 and 989 more"
	course := e.rec.of(event.Course)
	if len(course) != 1 || !strings.HasSuffix(course[0].Message, unblocked) {
		t.Fatalf("retry's course event: %.300s", course[0].Message)
	}
	if st := h.State(); len(st.StatusReason) > 300 || !strings.Contains(st.StatusReason, unblocked) {
		t.Fatalf("status reason after retry (%d bytes): %.300s", len(st.StatusReason), st.StatusReason)
	}
}

// When many steps fail, the status reason names ten with their errors and counts the rest; the
// plan keeps every step's error.
func TestManyFailedStepsAreNamedTenInTheReason(t *testing.T) {
	e := newEnv(t)
	var plan strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&plan, "        - {id: f%02d, description: step %d, agent: A}\n", i, i)
	}
	h, err := e.m.Create(parseTask(t, `id: many
agent: A
autonomy: 5
agents:
  A:
    driver: script
    script:
      plan:
`+plan.String()+`      steps:
        "*": [{fail: permanent, message: it broke}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed {
		t.Fatalf("run: %v, %s", err, h.Status())
	}
	st := h.State()
	if got := strings.Count(st.StatusReason, "failed: it broke"); got != 10 || !strings.HasSuffix(st.StatusReason, "; and 30 more failed steps") {
		t.Fatalf("status reason names %d failures (%d bytes): %.400s", got, len(st.StatusReason), st.StatusReason)
	}
	errs := 0
	for _, s := range st.Plan.Steps {
		if s.Status == statefmt.StepFailed && s.Error != nil && *s.Error != "" {
			errs++
		}
	}
	if errs != 40 {
		t.Fatalf("%d failed steps keep their error in the plan, want 40", errs)
	}
}
