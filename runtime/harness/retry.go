package harness

import (
	"errors"
	"fmt"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// Course-change actions: the `action` of a course event.
const (
	CourseRetry = "retry"
)

// ErrNothingToRetry is returned by Retry for a harness with no failed step to take back (and
// that has not failed).
var ErrNothingToRetry = errors.New("nothing to retry")

// ErrSubAgent refuses a change of course on a sub-agent: its parent decides what it runs.
var ErrSubAgent = errors.New("is a sub-agent")

// ErrUnknownStep is a step id the harness's plan does not have.
var ErrUnknownStep = errors.New("no such step")

// ErrRunning refuses a change of course on a harness that is running: pause it first.
var ErrRunning = errors.New("is running")

// RetryResult says what a retry took back.
type RetryResult struct {
	HarnessID string          `json:"harnessId"`
	Status    statefmt.Status `json:"status"`
	// Steps are the failed steps made ready again; Unblocked the steps they had blocked.
	Steps     []string `json:"steps"`
	Unblocked []string `json:"unblocked,omitempty"`
	// PlansAgain says the harness has no plan (it failed planning): resume plans again. Else
	// its plan is kept as it is, and resume runs the steps not done yet.
	PlansAgain bool `json:"plansAgain,omitempty"`
}

// Retry takes a failed harness, or one failed step of it, back to runnable, keeping its
// history: the steps' attempt counters go on counting (the next attempt is a retry), the tool
// calls, sub-agents and events stay. A failed harness becomes paused (the one way out of
// failed), so that resume runs it again; without stepID every failed step is retried (a harness
// that failed before it had a plan plans again). The steps a retried step had blocked go back
// to pending. The change is one checkpoint with a state_transition (when the status changes)
// and a course event naming who asked and why. Refused, it changes nothing: a running harness,
// a sub-agent (retry its parent), a completed one, a step that has not failed.
func (m *Manager) Retry(id, stepID, by, reason string) (RetryResult, error) {
	h, err := m.Get(id)
	if err != nil {
		return RetryResult{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.st
	if st.ParentHarnessID != "" {
		return RetryResult{}, fmt.Errorf("harness %s %w of %s: retry %s (a failed delegated step spawns a new sub-agent)", id, ErrSubAgent, st.ParentHarnessID, st.ParentHarnessID)
	}
	if h.running || st.Status == statefmt.StatusRunning {
		return RetryResult{}, fmt.Errorf("harness %s %w: pause it first (`harness-edge pause %s`), then retry", id, ErrRunning, id)
	}
	if st.Status == statefmt.StatusCompleted {
		return RetryResult{}, fmt.Errorf("harness %s has completed: %w (run the task again under another id)", id, ErrNothingToRetry)
	}
	var failed []int
	if st.Plan != nil {
		for i, s := range st.Plan.Steps {
			if s.Status == statefmt.StepFailed && (stepID == "" || s.ID == stepID) {
				failed = append(failed, i)
			}
		}
	}
	if stepID != "" && len(failed) == 0 {
		if st.Plan == nil || h.plan().step(stepID) < 0 {
			return RetryResult{}, fmt.Errorf("harness %s: %w %q (steps: %s)", id, ErrUnknownStep, stepID, stepList(st.Plan))
		}
		s := st.Plan.Steps[h.plan().step(stepID)]
		return RetryResult{}, fmt.Errorf("harness %s: step %s is %s, not failed: %w; %s", id, stepID, s.Status, ErrNothingToRetry, h.retryInsteadLocked(stepID))
	}
	if len(failed) == 0 && st.Status != statefmt.StatusFailed {
		if pending := pendingGatesOf(st); len(pending) > 0 {
			var gates []string
			for _, g := range pending {
				gates = append(gates, DescribeGate(g.ID, g.Kind, g.StepID))
			}
			return RetryResult{}, fmt.Errorf("harness %s is %s with no failed step: %w; %s waits for a human: `harness-edge approve %s` (or reject), then `harness-edge resume %s`",
				id, st.Status, ErrNothingToRetry, idlist.Join(gates, ", "), id, id)
		}
		return RetryResult{}, fmt.Errorf("harness %s is %s with no failed step: %w (resume it with `harness-edge resume %s`)", id, st.Status, ErrNothingToRetry, id)
	}

	saved := cloneState(st)
	pending0 := len(h.pending)
	undo := func() { h.st, h.pending = saved, h.pending[:pending0]; h.pidx = nil }
	h.touchAll()

	res := RetryResult{HarnessID: id, Steps: []string{}, PlansAgain: st.Plan == nil}
	for _, i := range failed {
		s := &st.Plan.Steps[i]
		s.Status, s.Error = statefmt.StepPending, nil
		res.Steps = append(res.Steps, s.ID)
	}
	if st.Plan != nil {
		res.Unblocked = unblock(st.Plan)
		h.pidx = nil // the index takes failed and blocked steps as final
		h.plan().refreshAll()
	}
	var next []string
	for _, sid := range res.Steps {
		next = append(next, fmt.Sprintf("step %s attempt %d", sid, st.Plan.Steps[h.plan().step(sid)].Attempts+1))
	}
	detail := idlist.Join(next, ", ")
	if st.Plan == nil {
		detail = "planning again"
	} else if detail == "" {
		detail = "no failed step; the plan is kept"
	}
	if len(res.Unblocked) > 0 {
		detail += "; unblocked " + idlist.Join(res.Unblocked, ", ")
	}
	what := "retry (" + detail + ") by " + orNone(by)
	if reason != "" {
		what += ": " + reason
	}
	h.emit(event.Event{Type: event.Course, Action: CourseRetry, StepID: stepID, By: by, Reason: reason, Message: detail})
	if st.Status == statefmt.StatusFailed {
		// failed is final to the lifecycle; a human's retry is the one way back, to paused.
		now := h.now()
		h.emit(event.Event{Type: event.StateTransition, Time: now, From: st.Status, To: statefmt.StatusPaused, Reason: what})
		st.Status, st.UpdatedAt = statefmt.StatusPaused, now
		st.StatusReason = what + "; resume to run it"
	} else {
		st.StatusReason = what + "; " + st.StatusReason
	}
	if err := h.checkpoint(); err != nil {
		undo()
		return RetryResult{}, err
	}
	res.Status = st.Status
	return res, nil
}

// retryInsteadLocked says what takes a harness on when `retry --step` names a step that has not
// failed: retrying the failed steps it waits on, or the harness's other failed steps; for a
// failed harness with no failed step left (a replan replaced or skipped the one that failed),
// a retry of the harness, which keeps its plan; else resume, which runs the steps not done yet
// (a completed step runs again only from a checkpoint before it). h.mu held.
func (h *Harness) retryInsteadLocked(stepID string) string {
	st, id := h.st, h.st.HarnessID
	x := h.plan()
	var failed, upstream []string
	for _, i := range failedSteps(st.Plan) {
		failed = append(failed, st.Plan.Steps[i].ID)
	}
	// The failed steps the named one waits on, through its dependencies.
	seen := map[int]bool{}
	var walk func(i int)
	walk = func(i int) {
		for _, d := range st.Plan.Steps[i].Dependencies {
			j := x.step(d)
			if j < 0 || seen[j] {
				continue
			}
			seen[j] = true
			if st.Plan.Steps[j].Status == statefmt.StepFailed {
				upstream = append(upstream, d)
			} else {
				walk(j)
			}
		}
	}
	pending := pendingGatesOf(st)
	s := st.Plan.Steps[x.step(stepID)]
	if s.Status == statefmt.StepBlocked {
		walk(x.step(stepID))
	}
	switch {
	case len(upstream) == 1:
		return fmt.Sprintf("it waits on failed step %s: retry that one (`harness-edge retry %s --step %s`), or every failed step (`harness-edge retry %s`)", upstream[0], id, upstream[0], id)
	case len(upstream) > 1:
		return fmt.Sprintf("it waits on failed steps %s: retry them all (`harness-edge retry %s`), or one at a time with --step", idlist.Join(upstream, ", "), id)
	case len(failed) > 0:
		return fmt.Sprintf("the failed steps are %s: retry them all (`harness-edge retry %s`), or one with --step", idlist.Join(failed, ", "), id)
	case st.Status == statefmt.StatusFailed:
		return fmt.Sprintf("the harness has failed with no failed step left (a replan replaced or skipped the one that failed, or it was stopped): "+
			"`harness-edge retry %s` (without --step) makes it paused, keeping its plan, and `harness-edge resume %s` then runs the steps not done yet", id, id)
	case s.Status == statefmt.StepCompleted:
		return fmt.Sprintf("a completed step runs again only from a checkpoint before it (`harness-edge rollback %s --to NAME|SEQ`); `harness-edge resume %s` runs the steps not done yet", id, id)
	case len(pending) > 0:
		var gates []string
		for _, g := range pending {
			gates = append(gates, DescribeGate(g.ID, g.Kind, g.StepID))
		}
		return fmt.Sprintf("nothing has failed, and %s waits for a human: `harness-edge approve %s` (or reject), then `harness-edge resume %s` runs the steps not done yet",
			idlist.Join(gates, ", "), id, id)
	default:
		return fmt.Sprintf("nothing has failed: `harness-edge resume %s` runs it, with the other steps not done yet", id)
	}
}

// unblock makes pending again every blocked step none of whose transitive dependencies has
// failed, and returns them in plan order.
func unblock(p *statefmt.ExecutionPlan) []string {
	x := indexPlan(p)
	doomed := x.downstream(failedSteps(p))
	var out []string
	for i := range p.Steps {
		if s := &p.Steps[i]; s.Status == statefmt.StepBlocked && !doomed[i] {
			s.Status = statefmt.StepPending
			out = append(out, s.ID)
		}
	}
	return out
}

// stepList names a plan's steps for an error message.
func stepList(p *statefmt.ExecutionPlan) string {
	if p == nil {
		return "none: the harness has no plan yet"
	}
	ids := make([]string, 0, len(p.Steps))
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	return idlist.Join(ids, ", ")
}

// pendingGatesOf returns the harness's own gates that wait for a human.
func pendingGatesOf(st *statefmt.HarnessState) []statefmt.Gate {
	var out []statefmt.Gate
	for _, g := range st.Gates {
		if g.Status == statefmt.GatePending {
			out = append(out, g)
		}
	}
	return out
}
