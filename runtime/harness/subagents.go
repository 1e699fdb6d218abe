package harness

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/harness-edge/harness-edge/runtime/agent"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// ChildTries is how many child harnesses a delegated step gets: the first, and one retry with
// the failure as context.
const ChildTries = 2

// childID names the n-th child harness of a step: PARENT.STEP, then PARENT.STEP.r2. Ids too long
// for the store keep their start and end a hash of the whole.
func childID(parent, step string, n int) string {
	id := parent + "." + step
	if n > 1 {
		id += fmt.Sprintf(".r%d", n)
	}
	if len(id) > 128 {
		f := fnv.New64a()
		f.Write([]byte(id))
		id = fmt.Sprintf("%s-%016x", id[:100], f.Sum64())
	}
	return id
}

// runChild runs a step assigned to another agent in a child harness: spawned (and persisted in
// the parent first, so a crash never orphans it), resumed when it already exists, its output
// taken when it already completed. A failed child is retried once with its error as context;
// a child waiting for a human suspends the parent.
func (h *Harness) runChild(ctx context.Context, i int) (string, error) {
	for {
		h.mu.Lock()
		step := h.st.Plan.Steps[i]
		cid := step.ChildHarnessID
		tries, prevErr, prevID := 0, "", ""
		for _, id := range h.st.SubAgentIDs {
			if r := h.st.SubAgentResults[id]; r.StepID == step.ID {
				tries++
				if r.Status == statefmt.StatusFailed && r.Error != nil {
					prevErr, prevID = *r.Error, id
				}
			}
		}
		if r, ok := h.st.SubAgentResults[cid]; cid == "" || ok && r.Status == statefmt.StatusFailed {
			// Each attempt of the step gets ChildTries children: a human's retry of a failed
			// delegated step is a new attempt, with new children.
			if tries >= ChildTries*(step.Attempts+1) {
				h.mu.Unlock()
				return "", &agent.StepError{Msg: fmt.Sprintf("sub-agent %s failed after a retry: %s", cid, prevErr)}
			}
			if depth := h.st.Depth + 1; depth > h.task.MaxDepth {
				h.mu.Unlock()
				return "", &agent.StepError{Msg: fmt.Sprintf("a sub-agent for step %s would be at depth %d, above the maximum %d", step.ID, depth, h.task.MaxDepth)}
			}
			cid = childID(h.ID(), step.ID, tries+1)
			h.st.Plan.Steps[i].ChildHarnessID = cid
			h.touch(i)
			h.st.SubAgentIDs = append(h.st.SubAgentIDs, cid)
			if h.st.SubAgentResults == nil {
				h.st.SubAgentResults = map[string]statefmt.SubAgentResult{}
			}
			h.st.SubAgentResults[cid] = statefmt.SubAgentResult{HarnessID: cid, AgentName: step.AssignedAgent, StepID: step.ID,
				Status: statefmt.StatusCreated, Attempts: tries + 1}
			msg := ""
			if prevErr != "" {
				msg = "retrying with the previous failure as context: " + prevErr
			}
			h.emit(event.Event{Type: event.SubAgent, SubAgentID: cid, StepID: step.ID, Agent: step.AssignedAgent, Outcome: "spawned", Message: msg})
			if err := h.checkpoint(); err != nil {
				h.mu.Unlock()
				return "", err
			}
		}
		h.mu.Unlock()

		child, err := h.m.child(h, cid, step, prevID, prevErr)
		if err != nil {
			return "", err
		}
		if s := child.Status(); s != statefmt.StatusCompleted && s != statefmt.StatusFailed {
			err = child.Run(ctx)
			if ctx.Err() != nil {
				// Cut short with the parent (a pause or a stop): the parent's view of the child
				// follows what it came to, and is checkpointed as the parent halts.
				if st := child.State(); st.Status != statefmt.StatusRunning {
					h.noteChild(cid, st, string(st.Status))
				}
				return "", ctx.Err()
			}
			if errors.Is(err, ErrPaused) {
				st := child.State()
				h.noteChild(cid, st, "waiting")
				return "", &suspended{fmt.Sprintf("sub-agent %s: %s", cid, st.StatusReason)}
			}
			if err != nil {
				return "", err
			}
		}
		st := child.State()
		h.noteChild(cid, st, "")
		if st.Status == statefmt.StatusCompleted || st.Status == statefmt.StatusFailed {
			// Done with: the parent holds its result. Memory would otherwise grow with every
			// sub-agent a long plan delegates to (a next try reads it back from the store).
			h.m.Release(cid)
		}
		if st.Status == statefmt.StatusCompleted {
			h.mu.Lock()
			err := h.takeChildWorkLocked(cid)
			h.mu.Unlock()
			if err != nil {
				return "", err
			}
			return OutputOf(st, "harness").Output, nil
		}
	}
}

// noteChild records a child's status (and outcome) in the parent and emits the sub_agent event.
func (h *Harness) noteChild(cid string, st *statefmt.HarnessState, outcome string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.st.SubAgentResults[cid]
	r.Status = st.Status
	var msg string
	switch st.Status {
	case statefmt.StatusCompleted:
		out := OutputOf(st, "harness").Output
		r.Output, r.CompletedAt, outcome = &out, &st.UpdatedAt, "completed"
	case statefmt.StatusFailed:
		reason := st.StatusReason
		r.Error, r.CompletedAt, outcome, msg = &reason, &st.UpdatedAt, "failed", reason
	default:
		msg = st.StatusReason
	}
	h.st.SubAgentResults[cid] = r
	h.emit(event.Event{Type: event.SubAgent, SubAgentID: cid, StepID: r.StepID, Agent: r.AgentName, Outcome: outcome, Message: msg})
}

// child returns the child harness cid of parent for step: the stored one when it exists, else a
// new one. Its task is the parent's with the step's agent as owner, the step's description (and
// the previous child's failure) as prompt, and a one-step plan, unless the agent is a script
// agent with its own plan. A step the parent's gate approved starts approved in the child, and
// a retry's step goes on counting attempts from the failed child's (a script's "fail ... times:
// N" fails the step's first N attempts, whichever child makes them).
func (m *Manager) child(parent *Harness, cid string, step statefmt.ExecutionStep, prevID, prevErr string) (*Harness, error) {
	if h, err := m.Get(cid); err == nil {
		return h, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	t := *parent.task
	t.Workspace = childWorkspace(t.Workspace, parent.ID()) // the parent's directory (its worktree, when isolated), or a worktree of its own
	t.ID, t.Agent, t.Plan = cid, step.AssignedAgent, nil
	t.Prompt = step.Description
	if parent.task.Prompt != "" {
		t.Prompt += "\n\n(part of: " + parent.task.Prompt + ")"
	}
	if prevErr != "" {
		t.Prompt += "\n\nA previous attempt at this failed: " + prevErr
	}
	plan, ownPlan := []task.PlanStep(nil), false
	if a := t.Agents[step.AssignedAgent]; a.Script == nil || len(a.Script.Plan) == 0 {
		t.Plan = []task.PlanStep{{ID: step.ID, Description: step.Description, Agent: step.AssignedAgent, Critical: step.Critical, Phase: step.Phase}}
		plan = t.Plan
	} else {
		plan, ownPlan = a.Script.Plan, true
	}
	t.Agents = childAgents(t.Agents, step.AssignedAgent, plan, ownPlan)
	carried := 0
	if prevID != "" && len(t.Plan) == 1 {
		if prev, err := m.Get(prevID); err == nil {
			if p := prev.State().Plan; p != nil && len(p.Steps) == 1 {
				carried = p.Steps[0].Attempts
			}
		}
	}
	parent.mu.Lock()
	depth, autonomy := parent.st.Depth+1, parent.st.AutonomyLevel
	var approved []statefmt.Gate
	for _, g := range parent.st.Gates {
		if g.Kind == GateStep && g.StepID == step.ID && g.Status == statefmt.GateApproved && len(t.Plan) == 1 {
			g.Reason = fmt.Sprintf("approved in parent %s (gate %s)", parent.ID(), g.ID)
			approved = append(approved, g)
		}
	}
	parent.mu.Unlock()
	return m.create(&t, func(st *statefmt.HarnessState) {
		st.ParentHarnessID, st.Depth, st.AutonomyLevel = parent.ID(), depth, autonomy
		st.Gates = approved
		if st.Plan != nil && len(st.Plan.Steps) == 1 {
			st.Plan.Steps[0].Attempts = carried
		}
	})
}

// childAgents returns agents with every script cut down to what a child owned by owner and
// running plan (its owner's own script plan when ownPlan) can reach: the actions of the steps
// that plan, and the plans of the script agents it delegates to, give each agent (with its "*"
// actions), and its plan when a delegation runs it. Nothing else of a script is ever looked up
// in the child: a sub-agent's plan is fixed when it is made (nobody replans one). Without the
// cut, every child stored every script whole, and a plan that delegates its N steps stored N
// copies of an N-step script. Agents of other drivers are kept as they are. agents itself is
// left alone.
func childAgents(agents map[string]*task.Agent, owner string, plan []task.PlanStep, ownPlan bool) map[string]*task.Agent {
	steps := map[string]map[string]bool{} // agent -> the step ids whose actions it may run
	plans := map[string]bool{owner: ownPlan}
	var reach func(owner string, plan []task.PlanStep)
	reach = func(owner string, plan []task.PlanStep) {
		for _, s := range plan {
			if a := agents[s.Agent]; s.Agent != owner && a != nil && a.Script != nil && len(a.Script.Plan) > 0 {
				if !plans[s.Agent] { // a grandchild runs the agent's own plan
					plans[s.Agent] = true
					reach(s.Agent, a.Script.Plan)
				}
				continue
			}
			if steps[s.Agent] == nil {
				steps[s.Agent] = map[string]bool{}
			}
			steps[s.Agent][s.ID] = true
		}
	}
	reach(owner, plan)
	out := make(map[string]*task.Agent, len(agents))
	for name, a := range agents {
		if a == nil || a.Script == nil {
			out[name] = a
			continue
		}
		sc := &task.Script{}
		if plans[name] {
			sc.Plan = a.Script.Plan
		}
		for id, actions := range a.Script.Steps {
			if steps[name][id] || id == "*" && steps[name] != nil {
				if sc.Steps == nil {
					sc.Steps = map[string][]task.Action{}
				}
				sc.Steps[id] = actions
			}
		}
		c := *a
		c.Script = sc
		out[name] = &c
	}
	return out
}

// delegationDepthOf is how deep a task's sub-agents nest when the plans are known before the run
// (the task's plan, and the plans of script agents it delegates to). It fails on a delegation
// cycle (an agent that, through its sub-agents, delegates to itself).
func delegationDepthOf(t *task.Task) (int, error) {
	plan := t.Plan
	if len(plan) == 0 {
		if a := t.Agents[t.Agent]; a != nil && a.Script != nil {
			plan = a.Script.Plan
		}
	}
	return delegationDepth(t, t.Agent, plan, []string{t.Agent})
}

func delegationDepth(t *task.Task, owner string, plan []task.PlanStep, chain []string) (int, error) {
	d := 0
	for _, s := range plan {
		if s.Agent == owner {
			continue
		}
		if slices.Contains(chain, s.Agent) {
			return 0, fmt.Errorf("sub-agents delegate in a cycle: %s -> %s", strings.Join(chain, " -> "), s.Agent)
		}
		sub := 0
		if a := t.Agents[s.Agent]; a != nil && a.Script != nil && len(a.Script.Plan) > 0 {
			var err error
			if sub, err = delegationDepth(t, s.Agent, a.Script.Plan, append(slices.Clone(chain), s.Agent)); err != nil {
				return 0, err
			}
		}
		d = max(d, 1+sub)
	}
	return d, nil
}
