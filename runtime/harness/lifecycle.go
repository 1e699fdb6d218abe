package harness

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/statefmt"
)

// transitions is the harness lifecycle: anything else is refused.
var transitions = map[statefmt.Status][]statefmt.Status{
	statefmt.StatusCreated: {statefmt.StatusRunning},
	statefmt.StatusRunning: {statefmt.StatusPaused, statefmt.StatusCompleted, statefmt.StatusFailed},
	statefmt.StatusPaused:  {statefmt.StatusRunning, statefmt.StatusFailed},
}

// waysOn says, for every status the lifecycle has no transition from, what a person can do
// with a harness in it instead (%[1]s is the harness's id): its course commands still apply.
// A status without transitions must have an entry (a test checks it).
var waysOn = map[statefmt.Status]string{
	statefmt.StatusFailed: "`harness-edge retry %[1]s` makes it paused, to resume (after `harness-edge replan %[1]s FILE` " +
		"when its plan needs a change); `harness-edge rollback %[1]s --to NAME|SEQ` takes it back to a checkpoint; " +
		"`harness-edge delete %[1]s` removes it",
	statefmt.StatusCompleted: "its plan is done: `harness-edge rollback %[1]s --to NAME|SEQ` takes it back to a checkpoint, " +
		"to run the steps after it again; `harness-edge delete %[1]s` removes it; or run the task again under another id",
}

// canTransition reports whether a harness may go from one status to another.
func canTransition(from, to statefmt.Status) bool { return slices.Contains(transitions[from], to) }

// TransitionError is a refused lifecycle transition.
type TransitionError struct {
	HarnessID string
	From, To  statefmt.Status
	// Parent is the harness whose sub-agent this one is (empty for a top-level harness).
	Parent string
}

func (e *TransitionError) Error() string {
	if next := transitions[e.From]; len(next) > 0 {
		names := make([]string, len(next))
		for i, s := range next {
			names[i] = string(s)
		}
		return fmt.Sprintf("harness %s is %s: it cannot go to %s (from %s it can go to %s)", e.HarnessID, e.From, e.To, e.From, strings.Join(names, " or "))
	}
	// No transition leaves this status: the lifecycle is done with the harness, but a person's
	// course commands are not.
	why := fmt.Sprintf("it cannot go to %s: it has stopped", e.To)
	if e.To == statefmt.StatusFailed { // a stop
		why = "it has stopped already"
	}
	var then string
	switch ways, ok := waysOn[e.From]; {
	case e.Parent != "":
		then = fmt.Sprintf("it is a sub-agent of %[1]s and follows its course: retry, replan, roll back or delete %[1]s instead", e.Parent)
	case ok:
		then = fmt.Sprintf(ways, e.HarnessID)
	default:
		then = "nothing moves it from " + string(e.From)
	}
	return fmt.Sprintf("harness %s is %s: %s; %s", e.HarnessID, e.From, why, then)
}

// transitionError is the refusal of a move of the harness in s to status to.
func transitionError(s *statefmt.HarnessState, to statefmt.Status) *TransitionError {
	return &TransitionError{HarnessID: s.HarnessID, From: s.Status, To: to, Parent: s.ParentHarnessID}
}

// transition moves s to status `to`, or refuses and changes nothing. It returns the event.
func transition(s *statefmt.HarnessState, to statefmt.Status, reason string, now time.Time) (event.Event, error) {
	if !canTransition(s.Status, to) {
		return event.Event{}, transitionError(s, to)
	}
	ev := event.Event{Type: event.StateTransition, HarnessID: s.HarnessID, Time: now, From: s.Status, To: to, Reason: reason}
	s.Status, s.StatusReason, s.UpdatedAt = to, reason, now
	return ev, nil
}
