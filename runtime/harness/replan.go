package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// CourseReplan is the action of the course event a replan makes.
const CourseReplan = "replan"

// ErrBadChange marks a plan change that does not validate (every problem is in the message).
var ErrBadChange = errors.New("the plan change is not valid")

// ReplanResult says what a replan did.
type ReplanResult struct {
	HarnessID string          `json:"harnessId"`
	Status    statefmt.Status `json:"status"`
	// Summary says what changed, in a few words.
	Summary string `json:"summary"`
	// Plan is the plan after the change.
	Plan *statefmt.ExecutionPlan `json:"plan"`
	// Superseded are the unfinished sub-agents of the steps the change skipped or replaced:
	// the parent counts them failed, and they are ended (their gates closed).
	Superseded []string `json:"superseded,omitempty"`
}

// ErrNothingToReplan is returned by Replan for a harness with no plan left to change: it has
// completed, or has no plan yet.
var ErrNothingToReplan = errors.New("nothing to replan")

// Replan applies a plan change (task.PlanChange, in YAML or JSON; name is used in errors) to a
// harness that is paused, created or failed: steps skipped (completed with an output that says
// so), replaced (description, agent, critical, script actions: a failed one starts again as
// pending), inserted, or their dependencies changed. The change is validated whole against the
// plan and the task's agents first, like a task file (every problem, with its line); one
// problem refuses all of it. Applied, it is one checkpoint, with the changed task when actions
// changed, a course event with who and why, and the gates pending on changed steps closed. A
// failed harness stays failed: `retry` then makes it runnable.
func (m *Manager) Replan(id, name string, data []byte, by, reason string) (ReplanResult, error) {
	h, err := m.Get(id)
	if err != nil {
		return ReplanResult{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.st
	switch {
	case st.ParentHarnessID != "":
		return ReplanResult{}, fmt.Errorf("harness %s %w of %s: replan %s", id, ErrSubAgent, st.ParentHarnessID, st.ParentHarnessID)
	case h.running || st.Status == statefmt.StatusRunning:
		return ReplanResult{}, fmt.Errorf("harness %s %w: pause it first (`harness-edge pause %s`), then replan", id, ErrRunning, id)
	case st.Status == statefmt.StatusCompleted:
		return ReplanResult{}, fmt.Errorf("harness %s has completed: %w (there is nothing left to change)", id, ErrNothingToReplan)
	case st.Plan == nil:
		return ReplanResult{}, fmt.Errorf("harness %s has no plan yet: %w (resume it to plan)", id, ErrNothingToReplan)
	}
	res, err := h.replanLocked(name, data, by, reason, "", func(summary string) {
		h.answerRejectionsLocked(by, summary)
		what := "replanned (" + summary + ") by " + orNone(by)
		if reason != "" {
			what += ": " + reason
		}
		switch st.Status {
		case statefmt.StatusFailed:
			st.StatusReason = what + "; retry it to run the new plan (`harness-edge retry " + id + "`)"
		default:
			st.StatusReason = what + "; resume to go on"
		}
	})
	if err != nil {
		return res, err
	}
	h.mu.Unlock()
	defer h.mu.Lock()
	if err := m.endSuperseded(h); err != nil {
		return res, fmt.Errorf("harness %s was replanned, but %w (its parent counts it failed; resume %s ends it)", id, err, id)
	}
	return res, nil
}

// supersededBy starts the error a parent records for a sub-agent a replan superseded.
const supersededBy = "superseded by a replan of "

// endSuperseded ends the sub-agents h counts superseded by a replan that are not ended yet, and
// theirs. A replan checkpoints the parent first and ends its sub-agents after: a process that
// dies between the two (or a sub-agent that could not be ended) leaves one paused, or waiting at
// a gate nobody would answer, that its parent no longer looks at. Replan and resume both make up
// for it. h.mu not held.
func (m *Manager) endSuperseded(h *Harness) error {
	type sup struct{ id, why string }
	var todo []sup
	h.mu.Lock()
	for _, cid := range h.st.SubAgentIDs {
		if r, ok := h.st.SubAgentResults[cid]; ok && r.Status == statefmt.StatusFailed && r.Error != nil && strings.HasPrefix(*r.Error, supersededBy) {
			todo = append(todo, sup{cid, *r.Error})
		}
	}
	h.mu.Unlock()
	for _, s := range todo {
		if err := m.supersede(s.id, s.why); err != nil {
			return fmt.Errorf("its sub-agent %s could not be ended: %w", s.id, err)
		}
	}
	return nil
}

// supersede ends a sub-agent whose step a replan skipped or replaced, and its own unfinished
// sub-agents: their pending gates are closed (rejected, with why) and they fail with why. A
// gate left pending there would keep the parent from resuming, and the sub-agent would wait for
// a human forever. Its parent already counts it failed. One already ended has its own
// superseded sub-agents ended, should they not be yet.
func (m *Manager) supersede(cid, why string) error {
	c, err := m.Get(cid)
	if errors.Is(err, store.ErrNotFound) {
		return nil // never created: the parent recorded it, then stopped
	} else if err != nil {
		return err
	}
	c.mu.Lock()
	if c.running || c.st.Status == statefmt.StatusCompleted {
		c.mu.Unlock()
		return nil
	}
	if c.st.Status == statefmt.StatusFailed {
		c.mu.Unlock()
		if err := m.endSuperseded(c); err != nil {
			return err
		}
		m.Release(cid)
		return nil
	}
	now := c.now()
	for gi := range c.st.Gates {
		if g := &c.st.Gates[gi]; g.Status == statefmt.GatePending {
			g.Status, g.ResolvedAt, g.Reason = statefmt.GateRejected, &now, why
			c.emit(event.Event{Type: event.Gate, GateID: g.ID, StepID: g.StepID, Kind: g.Kind, Action: "rejected", Reason: g.Reason,
				WaitMs: event.Ms(now.Sub(g.CreatedAt))})
		}
	}
	c.supersedeChildrenLocked(why)
	err = c.stopWithLocked(why)
	c.mu.Unlock()
	if err != nil {
		m.Release(cid) // its gates and results changed in memory only: read it again next time
		return err
	}
	if err := m.endSuperseded(c); err != nil {
		return err
	}
	m.Release(cid)
	return nil
}

// supersedeChildrenLocked counts the unfinished sub-agents of the steps it names (all of them
// when steps is nil) failed with why, and returns them. h.mu held.
func (h *Harness) supersedeChildrenLocked(why string, steps ...string) []string {
	var out []string
	for _, cid := range h.st.SubAgentIDs {
		r, ok := h.st.SubAgentResults[cid]
		if !ok || r.Status == statefmt.StatusCompleted || r.Status == statefmt.StatusFailed || steps != nil && !slices.Contains(steps, r.StepID) {
			continue
		}
		now := h.now()
		r.Status, r.Error, r.CompletedAt = statefmt.StatusFailed, &why, &now
		h.st.SubAgentResults[cid] = r
		h.emit(event.Event{Type: event.SubAgent, SubAgentID: cid, StepID: r.StepID, Agent: r.AgentName, Outcome: "failed", Message: why})
		out = append(out, cid)
	}
	return out
}

// currentSteps is a plan as a plan change sees it.
func currentSteps(p *statefmt.ExecutionPlan) []task.CurrentStep {
	current := make([]task.CurrentStep, len(p.Steps))
	for i, s := range p.Steps {
		current[i] = task.CurrentStep{PlanStep: task.PlanStep{ID: s.ID, Description: s.Description, Agent: s.AssignedAgent,
			DependsOn: s.Dependencies, Critical: s.Critical, Phase: s.Phase}, Completed: s.Status == statefmt.StepCompleted}
	}
	return current
}

// checkChange validates a plan change against a plan and a task whole, as replanLocked does
// before it changes anything: the change itself, and the task it makes when it gives actions.
func checkChange(name string, data []byte, current []task.CurrentStep, t *task.Task) (*task.PlanChange, []task.PlanStep, *task.Task, []byte, error) {
	change, steps, err := task.ParsePlanChange(name, data, current, t.Agents)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w:\n%w", ErrBadChange, err)
	}
	// The task changes only when the change gives script actions.
	newTask, taskJSON, err := withActions(t, change, steps)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %w", ErrBadChange, err)
	}
	return change, steps, newTask, taskJSON, nil
}

// replanLocked validates a plan change and applies it as one checkpoint (see Replan); by and
// reason are who made it and why, gateID the rejected gate it answers (if any), and finish
// sets what else the checkpoint records (the status reason) from the change's summary. A
// refused or failed change leaves the harness as it was. h.mu held.
func (h *Harness) replanLocked(name string, data []byte, by, reason, gateID string, finish func(summary string)) (ReplanResult, error) {
	st, id := h.st, h.st.HarnessID
	change, steps, newTask, taskJSON, err := checkChange(name, data, currentSteps(st.Plan), h.task)
	if err != nil {
		return ReplanResult{}, fmt.Errorf("harness %s: %w", id, err)
	}

	saved, pending0, task0, json0, agents0 := cloneState(st), len(h.pending), h.task, h.taskJSON, h.agents
	undo := func() {
		h.st, h.pending, h.task, h.taskJSON, h.agents, h.pidx = saved, h.pending[:pending0], task0, json0, agents0, nil
	}
	h.touchAll()
	now := h.now()
	summary := change.Summary()
	who := orNone(by)
	var superseded []string
	p := st.Plan
	for i := range p.Steps {
		ns := steps[i]
		s := &p.Steps[i]
		_, replaced := change.Replace[s.ID]
		if replaced {
			s.Description, s.AssignedAgent, s.Critical = ns.Description, ns.Agent, ns.Critical
			if s.Status == statefmt.StepFailed || s.Status == statefmt.StepBlocked {
				s.Status, s.Error = statefmt.StepPending, nil
			}
			s.ChildHarnessID = ""
			if st.CurrentStepIndex == i {
				st.AgentLoopSnapshot = nil // the loop belonged to the step as it was
			}
		}
		s.Dependencies = slices.Clone(ns.DependsOn)
		if slices.Contains(change.Skip, s.ID) {
			out := fmt.Sprintf("(skipped by %s)", who)
			if reason != "" {
				out = fmt.Sprintf("(skipped by %s: %s)", who, reason)
			}
			s.Status, s.Output, s.Error = statefmt.StepCompleted, &out, nil
			if st.CurrentStepIndex == i {
				st.AgentLoopSnapshot = nil
			}
		}
		if replaced || slices.Contains(change.Skip, s.ID) {
			superseded = append(superseded, h.supersedeChildrenLocked(supersededBy+id, s.ID)...)
			for gi := range st.Gates {
				if g := &st.Gates[gi]; g.StepID == s.ID && g.Status == statefmt.GatePending {
					g.Status, g.ResolvedAt, g.Reason = statefmt.GateRejected, &now, "superseded by a replan"
					h.emit(event.Event{Type: event.Gate, GateID: g.ID, StepID: g.StepID, Kind: g.Kind, Action: "rejected", Reason: g.Reason,
						WaitMs: event.Ms(now.Sub(g.CreatedAt))})
				}
			}
		}
	}
	for _, ns := range steps[len(p.Steps):] {
		p.Steps = append(p.Steps, statefmt.ExecutionStep{ID: ns.ID, Description: ns.Description, AssignedAgent: ns.Agent,
			Dependencies: slices.Clone(ns.DependsOn), Critical: ns.Critical, Status: statefmt.StepPending})
	}
	restatus(p)
	h.pidx = nil
	// A gate that waits before a step the change made wait for other steps again (it now
	// depends on an inserted one) is asked too early: the steps before it must run first. It is
	// superseded, and a new one opens when the step is ready again.
	x := indexPlan(p)
	for gi := range st.Gates {
		g := &st.Gates[gi]
		if g.Status != statefmt.GatePending || g.Kind != GateStep {
			continue
		}
		if i := x.step(g.StepID); i >= 0 && p.Steps[i].Status != statefmt.StepReady {
			g.Status, g.ResolvedAt = statefmt.GateRejected, &now
			g.Reason = "superseded by a replan: step " + g.StepID + " waits for the steps it now depends on"
			h.emit(event.Event{Type: event.Gate, GateID: g.ID, StepID: g.StepID, Kind: g.Kind, Action: "rejected", Reason: g.Reason,
				WaitMs: event.Ms(now.Sub(g.CreatedAt))})
		}
	}
	if newTask != nil {
		h.task, h.taskJSON, h.agents = newTask, taskJSON, map[string]agent.Agent{}
	}
	h.emit(event.Event{Type: event.Course, Action: CourseReplan, By: by, Reason: reason, GateID: gateID, Steps: len(p.Steps), Message: summary})
	finish(summary)
	statefmt.Normalize(st)
	if err := st.Validate(); err != nil {
		undo()
		return ReplanResult{}, fmt.Errorf("harness %s: the replanned state is not valid: %w", id, err)
	}
	if err := h.checkpoint(); err != nil {
		undo()
		return ReplanResult{}, err
	}
	return ReplanResult{HarnessID: id, Status: st.Status, Summary: summary, Plan: cloneState(st).Plan, Superseded: superseded}, nil
}

// restatus gives every step that has not completed, failed or started the status its
// dependencies make: blocked under a failed step, ready when they have all completed, pending
// otherwise.
func restatus(p *statefmt.ExecutionPlan) {
	x := indexPlan(p)
	doomed := x.downstream(failedSteps(p))
	for i := range p.Steps {
		s := &p.Steps[i]
		switch s.Status {
		case statefmt.StepCompleted, statefmt.StepFailed, statefmt.StepRunning:
			continue
		}
		switch {
		case doomed[i]:
			s.Status = statefmt.StepBlocked
		default:
			s.Status = statefmt.StepPending
			x.refresh(i)
		}
	}
}

// withActions returns the task with the change's script actions in it (for the agents the
// steps have after the change), and its JSON, or nil when the change gives none. The task is
// copied through its JSON, and the copy read back as a stored task is: the harness's task stays
// as it is until the change is made, and what is stored reads back.
func withActions(t *task.Task, c *task.PlanChange, steps []task.PlanStep) (*task.Task, []byte, error) {
	agentOf := map[string]string{}
	for _, s := range steps {
		agentOf[s.ID] = s.Agent
	}
	actions := map[string][]task.Action{}
	for id, ch := range c.Replace {
		if len(ch.Actions) > 0 {
			actions[id] = ch.Actions
		}
	}
	for _, n := range c.Insert {
		if len(n.Actions) > 0 {
			actions[n.ID] = n.Actions
		}
	}
	if len(actions) == 0 {
		return nil, nil, nil
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, nil, err
	}
	nt, err := task.Parse("the stored task", b)
	if err != nil {
		return nil, nil, err
	}
	for id, acts := range actions {
		a := nt.Agents[agentOf[id]]
		if a == nil {
			return nil, nil, fmt.Errorf("step %s: no agent %q", id, agentOf[id])
		}
		if a.Script == nil {
			a.Script = &task.Script{}
		}
		if a.Script.Steps == nil {
			a.Script.Steps = map[string][]task.Action{}
		}
		a.Script.Steps[id] = acts
	}
	if b, err = json.Marshal(nt); err != nil {
		return nil, nil, err
	}
	if nt, err = task.Parse("the replanned task", b); err != nil {
		return nil, nil, err
	}
	return nt, b, nil
}
