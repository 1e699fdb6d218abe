package harness

import (
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
)

// TestEveryStatusWithoutATransitionSaysWhatCanBeDone: a refused transition from a status the
// lifecycle has no way out of never says the harness is final or can go nowhere (course
// commands still apply); it says what a person can do: for a failed harness retry (replan
// first), rollback or delete, for a completed one rollback or delete, for a sub-agent its
// parent. Every such status has its ways on, and only such statuses.
func TestEveryStatusWithoutATransitionSaysWhatCanBeDone(t *testing.T) {
	for s := range waysOn {
		if len(transitions[s]) > 0 {
			t.Errorf("%s has transitions and ways on: the message would not use them", s)
		}
	}
	want := map[statefmt.Status][]string{
		statefmt.StatusFailed:    {"`harness-edge retry h1` makes it paused", "`harness-edge replan h1 FILE`", "`harness-edge rollback h1 --to NAME|SEQ`", "`harness-edge delete h1`"},
		statefmt.StatusCompleted: {"its plan is done", "`harness-edge rollback h1 --to NAME|SEQ`", "`harness-edge delete h1`"},
	}
	for _, from := range statefmt.Statuses {
		if len(transitions[from]) > 0 {
			continue
		}
		if _, ok := waysOn[from]; !ok {
			t.Errorf("%s has no transition and no ways on", from)
		}
		if want[from] == nil {
			t.Errorf("%s: the test does not know what it should say", from)
		}
		for _, to := range statefmt.Statuses {
			msg := (&TransitionError{HarnessID: "h1", From: from, To: to}).Error()
			for _, bad := range []string{"final", "none", "nothing moves"} {
				if strings.Contains(msg, bad) {
					t.Errorf("%s -> %s says %q: %s", from, to, bad, msg)
				}
			}
			for _, w := range want[from] {
				if !strings.Contains(msg, w) {
					t.Errorf("%s -> %s lacks %q: %s", from, to, w, msg)
				}
			}
			head := "harness h1 is " + string(from) + ": it cannot go to " + string(to) + ": it has stopped; "
			if to == statefmt.StatusFailed {
				head = "harness h1 is " + string(from) + ": it has stopped already; "
			}
			if !strings.HasPrefix(msg, head) {
				t.Errorf("%s -> %s does not start with %q: %s", from, to, head, msg)
			}
			if from == statefmt.StatusCompleted && strings.Contains(msg, "retry") {
				t.Errorf("a completed harness cannot be retried, yet: %s", msg)
			}
			sub := (&TransitionError{HarnessID: "h1.s1", From: from, To: to, Parent: "h1"}).Error()
			if !strings.Contains(sub, "it is a sub-agent of h1 and follows its course: retry, replan, roll back or delete h1 instead") || strings.Contains(sub, "h1.s1`") {
				t.Errorf("a sub-agent's %s -> %s: %s", from, to, sub)
			}
		}
	}
	if got := (&TransitionError{HarnessID: "h1", From: statefmt.StatusPaused, To: statefmt.StatusCompleted}).Error(); got != "harness h1 is paused: it cannot go to completed (from paused it can go to running or failed)" {
		t.Errorf("paused -> completed: %s", got)
	}
}
