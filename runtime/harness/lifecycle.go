package harness

import (
	"fmt"
	"slices"
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

// canTransition reports whether a harness may go from one status to another.
func canTransition(from, to statefmt.Status) bool { return slices.Contains(transitions[from], to) }

// TransitionError is a refused lifecycle transition.
type TransitionError struct {
	HarnessID string
	From, To  statefmt.Status
}

func (e *TransitionError) Error() string {
	allowed := "none: it is final"
	if next := transitions[e.From]; len(next) > 0 {
		allowed = fmt.Sprint(next)
	}
	return fmt.Sprintf("harness %s is %s: it cannot go to %s (from %s it can go to %s)", e.HarnessID, e.From, e.To, e.From, allowed)
}

// transition moves s to status `to`, or refuses and changes nothing. It returns the event.
func transition(s *statefmt.HarnessState, to statefmt.Status, reason string, now time.Time) (event.Event, error) {
	if !canTransition(s.Status, to) {
		return event.Event{}, &TransitionError{HarnessID: s.HarnessID, From: s.Status, To: to}
	}
	ev := event.Event{Type: event.StateTransition, HarnessID: s.HarnessID, Time: now, From: s.Status, To: to, Reason: reason}
	s.Status, s.StatusReason, s.UpdatedAt = to, reason, now
	return ev, nil
}
