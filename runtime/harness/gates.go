package harness

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/agent"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/statefmt"
)

// Gate kinds: a step that needs approval at the harness's autonomy level, a used-up budget, and
// a side-effecting call that may have run before an interruption (replay: ask).
const (
	GateStep   = "step"
	GateBudget = "budget" // the kind is "budget:" + the budget's name
	GateReplay = "replay"
)

// DescribeGate names a gate (name: its id, or HARNESS/ID) in a message by what it waits on:
// "gate g1 before step ship" (see GateOn).
func DescribeGate(name, kind, stepID string) string {
	if on := GateOn(kind, stepID); on != "" {
		return "gate " + name + " " + on
	}
	return "gate " + name
}

// GateOn says what a gate of a kind waits on, to follow "gate g1" in a message: "before step
// ship" (a step gate), "on the token budget at step ship", "on running a call of step ship
// again" (replay), "on the replan at step ship"; a kind it does not know is given as it is.
func GateOn(kind, stepID string) string {
	at, of, before := "", "", ""
	if stepID != "" {
		at, of, before = " at step "+stepID, " of step "+stepID, " before step "+stepID
	}
	switch {
	case kind == GateStep:
		if stepID == "" {
			return "before a step"
		}
		return strings.TrimPrefix(before, " ")
	case strings.HasPrefix(kind, GateBudget+":"):
		return "on the " + budgetName(strings.TrimPrefix(kind, GateBudget+":")) + " budget" + at
	case kind == GateReplay:
		return "on running a call" + of + " again"
	case kind == GateReplan:
		return "on the replan" + at
	case kind == "":
		return strings.TrimPrefix(at, " ")
	}
	return "(" + kind + ")" + at
}

// budgetName is a budget's name in a sentence: "token" for tokens, "wall-clock" for wallClock.
func budgetName(b string) string {
	switch b {
	case agent.BudgetToolCalls.String():
		return "tool-call"
	case agent.BudgetTokens.String():
		return "token"
	case agent.BudgetWallClock.String():
		return "wall-clock"
	case agent.BudgetCost.String():
		return "cost"
	}
	return b
}

// gateRequired is the autonomy rule: levels 1-2 gate every step, 3 gates critical steps, 4-5
// never gate.
func gateRequired(autonomy int, critical bool) bool {
	return autonomy <= 2 || autonomy == 3 && critical
}

// gateLocked stops the run at a step that needs approval and has none yet: it opens a gate
// (or finds the pending one) and pauses. It reports whether the run stopped. h.mu held.
func (h *Harness) gateLocked(step *statefmt.ExecutionStep) (bool, error) {
	if !gateRequired(h.task.Autonomy, step.Critical) {
		return false, nil
	}
	var last *statefmt.Gate
	for i := range h.st.Gates {
		if g := &h.st.Gates[i]; g.Kind == GateStep && g.StepID == step.ID {
			last = g
		}
	}
	if last != nil && last.Status == statefmt.GateApproved {
		return false, nil
	}
	why := fmt.Sprintf("step %s (%q) needs approval at autonomy %d", step.ID, step.Description, h.task.Autonomy)
	if step.Critical {
		why = fmt.Sprintf("critical step %s (%q) needs approval at autonomy %d", step.ID, step.Description, h.task.Autonomy)
	}
	if last != nil && last.Status == statefmt.GateRejected {
		why += fmt.Sprintf(" (gate %s rejected it: %s)", last.ID, last.Reason)
	}
	why += h.replanNoteLocked()
	return true, h.openGateLocked(GateStep, step.ID, why)
}

// addGateLocked adds a pending gate and its waiting_for_human event. h.mu held.
func (h *Harness) addGateLocked(kind, stepID, why string) *statefmt.Gate {
	id := fmt.Sprintf("g%d", len(h.st.Gates)+1)
	h.st.Gates = append(h.st.Gates, statefmt.Gate{ID: id, StepID: stepID, Status: statefmt.GatePending, Kind: kind, CreatedAt: h.now()})
	h.emit(event.Event{Type: event.Gate, GateID: id, StepID: stepID, Kind: kind, Action: "waiting_for_human", Message: why})
	return &h.st.Gates[len(h.st.Gates)-1]
}

// openGateLocked adds a gate and pauses the harness on it (persisted). h.mu held.
func (h *Harness) openGateLocked(kind, stepID, why string) error {
	g := h.addGateLocked(kind, stepID, why)
	if err := h.transitionLocked(statefmt.StatusPaused, fmt.Sprintf("waiting for a human: %s: %s", DescribeGate(g.ID, g.Kind, g.StepID), why)); err != nil {
		return err
	}
	return ErrWaiting
}

// overBudgetLocked says which budget is used up, if one is: tokens and wall clock always; tool
// calls only for a call within the attempt cur (before a step, cur is nil: a step that makes no
// calls may still run). h.mu held.
func (h *Harness) overBudgetLocked(cur *attemptState) *agent.BudgetError {
	b := h.st.Budget
	if b == nil {
		return nil
	}
	used, tokens, cost, wall := h.st.TotalToolCalls, b.TokensUsed, b.CostMicroUSDUsed, b.WallClockUsed
	calls := cur != nil
	if calls {
		used, tokens, cost = used+cur.executed, tokens+cur.tokens, cost+cur.cost
	}
	if !h.runMark.IsZero() {
		wall += h.now().Sub(h.runMark)
	}
	switch {
	case calls && b.ToolCalls > 0 && used >= b.ToolCalls:
		return &agent.BudgetError{Budget: agent.BudgetToolCalls, Msg: "the harness has used its budget of " + idlist.Of(b.ToolCalls, "tool call")}
	case b.Tokens > 0 && tokens >= b.Tokens:
		return &agent.BudgetError{Budget: agent.BudgetTokens, Msg: fmt.Sprintf("the harness has used %d of its budget of %d tokens", tokens, b.Tokens)}
	case b.CostMicroUSD > 0 && cost >= b.CostMicroUSD:
		return &agent.BudgetError{Budget: agent.BudgetCost, Msg: fmt.Sprintf("the harness has spent $%.4f of its budget of $%.4f (as its agents reported)", statefmt.USD(cost), statefmt.USD(b.CostMicroUSD))}
	case b.WallClock > 0 && wall >= b.WallClock:
		return &agent.BudgetError{Budget: agent.BudgetWallClock, Msg: fmt.Sprintf("the harness has run %v of its wall-clock budget of %v", wall.Round(time.Millisecond), b.WallClock)}
	}
	return nil
}

func (h *Harness) overBudget(cur *attemptState) *agent.BudgetError {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.overBudgetLocked(cur)
}

// budgetStopLocked decides what a used-up budget does: at autonomy 1-3 a human decides (a gate;
// approving it extends the budget), at 4-5 the step and the harness fail. h.mu held.
func (h *Harness) budgetStopLocked(step *statefmt.ExecutionStep, be *agent.BudgetError) error {
	if step.Status == statefmt.StepRunning {
		step.Status = statefmt.StepReady
		h.touch(h.plan().step(step.ID))
	}
	if h.task.Autonomy >= 4 {
		msg := "budget exceeded: " + be.Msg
		blocked := h.plan().fail(step.ID, msg)
		h.emit(event.Event{Type: event.StepFailed, StepID: step.ID, Message: msg, Blocked: blocked})
		return h.failLocked(msg)
	}
	return h.openGateLocked(GateBudget+":"+be.Budget.String(), step.ID, be.Msg+"; approving extends it by the task's budget again")
}

// extendBudgetLocked grows the budget an approved budget gate names by the task's amount. h.mu held.
func (h *Harness) extendBudgetLocked(kind string) {
	b := h.st.Budget
	if b == nil {
		return
	}
	or := func(task, current int64) int64 { // the task's amount, else what the limit is now
		if task > 0 {
			return task
		}
		return current
	}
	switch strings.TrimPrefix(kind, GateBudget+":") {
	case "toolCalls":
		b.ToolCalls += int(or(int64(h.task.Budget.ToolCalls), int64(b.ToolCalls)))
	case "tokens":
		b.Tokens += or(h.task.Budget.Tokens, b.Tokens)
	case "wallClock":
		b.WallClock += time.Duration(or(int64(h.task.Budget.WallClock.Duration), int64(b.WallClock)))
	case "costUSD":
		task, _ := statefmt.MicroUSD(h.task.Budget.CostUSD)
		b.CostMicroUSD += or(task, b.CostMicroUSD)
	}
}

// PendingGate is a gate waiting for a human, and the harness it belongs to (the one asked, or
// one of its sub-agents).
type PendingGate struct {
	HarnessID string
	Gate      statefmt.Gate
}

// PendingGates lists the pending gates of a harness and of its sub-agents.
func (m *Manager) PendingGates(id string) ([]PendingGate, error) {
	h, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	return m.pendingGates(h), nil
}

func (m *Manager) pendingGates(h *Harness) []PendingGate {
	var out []PendingGate
	var children []string
	h.mu.Lock()
	for _, g := range h.st.Gates {
		if g.Status == statefmt.GatePending {
			out = append(out, PendingGate{h.st.HarnessID, g})
		}
	}
	for _, cid := range h.st.SubAgentIDs {
		if r, ok := h.st.SubAgentResults[cid]; !ok || r.Status != statefmt.StatusCompleted && r.Status != statefmt.StatusFailed {
			children = append(children, cid)
		}
	}
	h.mu.Unlock()
	for _, cid := range children {
		if c, err := m.Get(cid); err == nil {
			out = append(out, m.pendingGates(c)...)
		}
	}
	return out
}

func describeGates(gs []PendingGate) string {
	var parts []string
	for _, g := range gs {
		parts = append(parts, DescribeGate(g.Gate.ID+" of "+g.HarnessID, g.Gate.Kind, g.Gate.StepID))
	}
	return idlist.JoinMore(parts, "; ", "pending gate")
}

// ErrNoGate is returned by Decide when there is no such pending gate.
var ErrNoGate = errors.New("no pending gate")

// Decide records a human's decision on a pending gate of a harness or of one of its sub-agents
// (gateID "" picks the only pending one), durably. Approving lets resume go on (a budget gate
// also extends its budget); rejecting records the reason and leaves the harness paused for
// replanning: resume then asks again (a rejected side-effecting call is not run again).
func (m *Manager) Decide(id, gateID string, approve bool, reason string) (PendingGate, error) {
	h, err := m.Get(id)
	if err != nil {
		return PendingGate{}, err
	}
	gates := m.pendingGates(h)
	var pick []PendingGate
	for _, g := range gates {
		if gateID == "" || g.Gate.ID == gateID || g.HarnessID+"/"+g.Gate.ID == gateID {
			pick = append(pick, g)
		}
	}
	switch {
	case len(pick) == 0 && gateID == "":
		return PendingGate{}, fmt.Errorf("harness %s: %w (nothing waits for a human)", id, ErrNoGate)
	case len(pick) == 0:
		return PendingGate{}, fmt.Errorf("harness %s: %w %s (pending: %s)", id, ErrNoGate, gateID, orNone(describeGates(gates)))
	case len(pick) > 1:
		return PendingGate{}, fmt.Errorf("harness %s has %d pending gates; name one (HARNESS/GATE): %s", id, len(pick), describeGates(pick))
	}
	target, err := m.Get(pick[0].HarnessID)
	if err != nil {
		return PendingGate{}, err
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	var g *statefmt.Gate
	for i := range target.st.Gates {
		if target.st.Gates[i].ID == pick[0].Gate.ID && target.st.Gates[i].Status == statefmt.GatePending {
			g = &target.st.Gates[i]
		}
	}
	if g == nil {
		return PendingGate{}, fmt.Errorf("harness %s: %w %s (decided meanwhile)", target.ID(), ErrNoGate, pick[0].Gate.ID)
	}
	saved, reason0 := *g, target.st.StatusReason
	budget := target.st.Budget
	if budget != nil {
		b := *budget
		budget = &b
	}
	now := target.now()
	g.ResolvedAt, g.Reason = &now, reason
	action := "rejected"
	if approve {
		g.Status, action = statefmt.GateApproved, "approved"
		target.st.StatusReason = DescribeGate(g.ID, g.Kind, g.StepID) + " approved: resume to continue"
		if strings.HasPrefix(g.Kind, GateBudget+":") {
			target.extendBudgetLocked(g.Kind)
		}
	} else {
		g.Status = statefmt.GateRejected
		target.st.StatusReason = fmt.Sprintf("%s rejected: %s (replan, then resume; or stop)", DescribeGate(g.ID, g.Kind, g.StepID), reason)
		if g.Kind == GateStep && target.ownerReplans() {
			target.st.StatusReason = fmt.Sprintf("%s rejected: %s (resume: %s replans by itself; or replan by hand, then resume)", DescribeGate(g.ID, g.Kind, g.StepID), reason, OwnerBy(target.task.Agent))
		}
	}
	target.emit(event.Event{Type: event.Gate, GateID: g.ID, StepID: g.StepID, Kind: g.Kind, Action: action, Reason: reason,
		WaitMs: event.Ms(now.Sub(g.CreatedAt))})
	if err := target.checkpoint(); err != nil {
		*g, target.st.StatusReason, target.st.Budget = saved, reason0, budget
		return PendingGate{}, err
	}
	return PendingGate{target.ID(), *g}, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
