package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/statefmt"
)

// GateReplan is the kind of the gate that records the owner agent's answer to a rejected step
// gate: approved when its plan change was applied, pending (a human decides) when it gave none
// that is valid.
const GateReplan = "replan"

// ReplanTries is how many answers an owner agent may give for one rejected gate before the
// harness stops at a gate saying that it could not replan.
const ReplanTries = 3

// OwnerBy is the `by` of a change of course an agent made by itself.
func OwnerBy(agentName string) string { return "agent:" + agentName }

// rejectionToAnswer is the rejected step gate of step that the owner agent has not answered
// yet (the step's last step gate, rejected, with no replan gate for the step after it), or nil.
// h.mu held.
func (h *Harness) rejectionToAnswer(step string) *statefmt.Gate {
	var last *statefmt.Gate
	for i := range h.st.Gates {
		g := &h.st.Gates[i]
		switch {
		case g.StepID != step:
		case g.Kind == GateStep:
			last = g
		case g.Kind == GateReplan && last != nil:
			last = nil // answered
		}
	}
	if last == nil || last.Status != statefmt.GateRejected {
		return nil
	}
	return last
}

// ownerReplanLocked lets the task's agent answer a rejected gate of step i with a plan change,
// when it is an agent that replans (agent.Replanner) and it has not answered that rejection
// yet. The model is asked with h.mu released; the change it gives is validated as `replan`
// validates one (a refused change is told to it, up to ReplanTries answers) and applied whole
// as one checkpoint, with a course event by the agent and the human's reason, and an approved
// replan gate recording the answer. When it gives no valid change (or cannot be asked), the
// harness stops at a pending replan gate that says so, its plan unchanged. replanned says that
// the plan changed (the caller picks the next step again); err is Run's result when the run
// stopped. h.mu held.
func (h *Harness) ownerReplanLocked(ctx context.Context, i int) (replanned bool, err error) {
	step := h.st.Plan.Steps[i]
	rejected := h.rejectionToAnswer(step.ID)
	if rejected == nil {
		return false, nil
	}
	owner := h.task.Agent
	if !h.ownerReplans() {
		return false, nil // the gate asks the human
	}
	if err := h.durableLocked(); err != nil { // the owner agent may reach outside
		return false, err
	}
	a, err := h.agent(owner)
	if err != nil {
		return false, nil
	}
	rp := a.(agent.Replanner)
	gateID, reason := rejected.ID, rejected.Reason
	by := OwnerBy(owner)
	current, t := currentSteps(h.st.Plan), h.task
	tries := 0
	name := func() string { return fmt.Sprintf("the plan change of %s (answer %d)", by, tries) }
	var tokens int64
	rc := &agent.ReplanContext{HarnessID: h.ID(), Task: t, Clock: h.m.clock, Plan: cloneState(h.st).Plan,
		StepID: step.ID, GateID: gateID, Reason: reason, Tries: ReplanTries,
		Check: func(change []byte) error {
			tries++
			_, _, _, _, err := checkChange(name(), change, current, t)
			return err
		},
		ReportTokens: func(n int64) { tokens += n }}
	h.mu.Unlock()
	change, err := rp.Replan(ctx, rc)
	h.mu.Lock()
	if b := h.st.Budget; b != nil {
		b.TokensUsed += tokens // what was spent is spent, whatever comes of it
	}
	if ctx.Err() != nil {
		return false, h.haltLocked(ctx)
	}
	if err == nil {
		_, err = h.replanLocked(name(), change, by, reason, gateID, func(summary string) {
			now := h.now()
			h.st.Gates = append(h.st.Gates, statefmt.Gate{ID: fmt.Sprintf("g%d", len(h.st.Gates)+1), StepID: step.ID, Kind: GateReplan,
				Status: statefmt.GateApproved, Reason: fmt.Sprintf("%s replanned (%s) after gate %s was rejected", by, summary, gateID),
				CreatedAt: now, ResolvedAt: &now})
			h.st.StatusReason = fmt.Sprintf("replanned (%s) by %s: %s", summary, by, reason)
		})
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, ErrBadChange) {
			return false, err
		}
	}
	why := fmt.Sprintf("%s could not replan after the rejection of %s (%s): %s; the plan is unchanged. "+
		"Change it by hand (`harness-edge replan %s FILE`), or approve or reject this gate to go on with the plan as it is",
		by, DescribeGate(gateID, GateStep, step.ID), reason, strings.Join(strings.Fields(err.Error()), " "), h.ID())
	return false, h.openGateLocked(GateReplan, step.ID, why)
}

// replanNoteLocked names the owner's last replan when no step gate was opened since: the first
// gate after it tells the human that the plan changed. h.mu held.
func (h *Harness) replanNoteLocked() string {
	note := ""
	for _, g := range h.st.Gates {
		switch {
		case g.Kind == GateReplan && g.Status == statefmt.GateApproved:
			note = g.Reason
		case g.Kind == GateStep:
			note = ""
		}
	}
	if note == "" {
		return ""
	}
	return fmt.Sprintf("; the plan changed: %s (`harness-edge plan %s` shows it)", note, h.ID())
}

// answerRejectionsLocked records a human's replan as the answer to the rejected step gates the
// owner agent would otherwise replan for on resume (only when the owner replans by itself):
// the human changed the plan already. h.mu held.
func (h *Harness) answerRejectionsLocked(by, summary string) {
	if !h.ownerReplans() {
		return
	}
	for _, s := range h.st.Plan.Steps {
		if g := h.rejectionToAnswer(s.ID); g != nil {
			now := h.now()
			h.st.Gates = append(h.st.Gates, statefmt.Gate{ID: fmt.Sprintf("g%d", len(h.st.Gates)+1), StepID: s.ID, Kind: GateReplan,
				Status: statefmt.GateApproved, Reason: fmt.Sprintf("%s replanned (%s) after gate %s was rejected", orNone(by), summary, g.ID),
				CreatedAt: now, ResolvedAt: &now})
		}
	}
}

// ownerReplans says whether the task's agent replans by itself after a rejected gate: not in
// a sub-agent, whose plan a human changes through its parent. h.mu held.
func (h *Harness) ownerReplans() bool {
	if h.st.ParentHarnessID != "" {
		return false
	}
	a, err := h.agent(h.task.Agent)
	if err != nil {
		return false
	}
	_, ok := a.(agent.Replanner)
	return ok
}

// OwnerReplanner names the agent that replans harness id by itself after a rejected step gate
// (as a change of course's `by`), or is "" when a human replans it.
func (m *Manager) OwnerReplanner(id string) string {
	h, err := m.Get(id)
	if err != nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ownerReplans() {
		return ""
	}
	return OwnerBy(h.task.Agent)
}
