package harness

import (
	"cmp"
	"sync/atomic"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/tools"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// stepAttempt is one step attempt as its agent and its tool calls see the harness: the agent's
// Host (saves, questions to a human, iterations, events, budgets) and the tool pipeline's
// Session (records, the side-effect journal, warnings). Everything it changes goes into the
// attempt's state under h.mu and joins the harness state when the attempt ends or saves.
type stepAttempt struct {
	h   *Harness
	cur *attemptState
	// saveDue is set by Dream Mode's timer when a save is due.
	saveDue atomic.Bool
}

var (
	_ agent.Host    = (*stepAttempt)(nil)
	_ tools.Session = (*stepAttempt)(nil)
)

func (a *stepAttempt) Save(loop *statefmt.AgentLoopSnapshot) error { return a.h.saveLoop(a.cur, loop) }

func (a *stepAttempt) SaveDue() bool { return a.saveDue.Swap(false) }

func (a *stepAttempt) AskHuman(kind, why string) error {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	return a.h.askLocked(a.cur.step, kind, why)
}

func (a *stepAttempt) CountIteration() {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	a.cur.iterations++
	a.cur.counted = true
}

func (a *stepAttempt) Emit(e event.Event) {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	e.HarnessID, e.StepID = a.h.ID(), cmp.Or(e.StepID, a.cur.step)
	if e.Time.IsZero() {
		e.Time = a.h.now()
	}
	a.cur.events = append(a.cur.events, e)
}

// OverBudget is the agent's question before an expensive request: tokens, cost and wall clock (the
// tool-call budget is the pipeline's to enforce, call by call).
func (a *stepAttempt) OverBudget() *agent.BudgetError {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	if be := a.h.overBudgetLocked(a.cur); be != nil && be.Budget != agent.BudgetToolCalls {
		return be
	}
	return nil
}

// CallOverBudget is the pipeline's question before a call: any budget, the attempt's calls
// counted.
func (a *stepAttempt) CallOverBudget() *agent.BudgetError {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	return a.h.overBudgetLocked(a.cur)
}

func (a *stepAttempt) reportTokens(n int64) {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	a.cur.tokens += max(n, 0)
}

func (a *stepAttempt) reportCost(micro int64) {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	a.cur.cost += max(micro, 0)
}

func (a *stepAttempt) Record(r statefmt.ToolCallRecord, executed bool) {
	a.h.recordToolCall(a.cur, r, executed)
}

func (a *stepAttempt) Intent(tool string, args statefmt.JSONValue, replay string) (int, *statefmt.ToolResult, error) {
	return a.h.journalIntent(a.cur, tool, args, replay)
}

func (a *stepAttempt) Durable() error {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	return a.h.durableLocked()
}

func (a *stepAttempt) Receipt(entry int, res statefmt.ToolResult) error {
	return a.h.journalReceipt(entry, res)
}

func (a *stepAttempt) Warn(tool, msg string) {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	a.cur.events = append(a.cur.events, event.Event{Type: event.Warning, HarnessID: a.h.ID(), Time: a.h.now(), StepID: a.cur.step, Tool: tool, Message: msg})
}
