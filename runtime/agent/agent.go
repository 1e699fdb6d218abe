// Package agent is the contract between the harness and its agent drivers: what a driver
// implements (Agent), what it is given for a step (StepContext, with the Host that the harness
// behind it provides), the tool calls it can make (ToolCaller), and the errors through which it
// tells the harness what happened. It imports nothing of the harness core, so a driver can be
// written, and tested, without one.
package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Agent is what a driver makes of an agent configuration.
type Agent interface {
	// Plan produces the plan of a task that declares none.
	Plan(ctx context.Context, pc *PlanContext) ([]task.PlanStep, error)
	// RunStep performs one attempt of a step and returns its output. A *StepError says whether
	// a failure is worth retrying; any other error is permanent.
	RunStep(ctx context.Context, sc *StepContext) (string, error)
}

// PlanContext is what an agent knows when it plans.
type PlanContext struct {
	HarnessID string
	Task      *task.Task
	Clock     clock.Clock
}

// Replanner is an Agent that can change its plan by itself. After a human rejected the gate
// of a step (with a reason) and the harness is resumed, the harness asks the task's own agent,
// when it is a Replanner, for a plan change instead of asking the human again. Drivers that
// are not (the script and command drivers) leave the replanning to a human.
type Replanner interface {
	// Replan returns a plan change (task.PlanChange, as JSON or YAML) that rc.Check accepts.
	// A change Check refuses is told to the model, with what is wrong, up to rc.Tries answers
	// in all; then Replan returns an error saying so.
	Replan(ctx context.Context, rc *ReplanContext) ([]byte, error)
}

// ReplanContext is what an agent knows when it replans after a rejected gate.
type ReplanContext struct {
	HarnessID string
	Task      *task.Task
	Clock     clock.Clock
	// Plan is the plan as it is now.
	Plan *statefmt.ExecutionPlan
	// StepID is the step whose gate GateID a human rejected, and Reason why.
	StepID, GateID, Reason string
	// Check validates a change as `harness-edge replan` does; its error names every problem.
	Check func(change []byte) error
	// Tries is how many answers the model may give in all.
	Tries int
	// ReportTokens charges the model tokens used to the harness's token budget.
	ReportTokens func(n int64)
}

// StepContext is what an agent knows when it runs a step attempt.
type StepContext struct {
	HarnessID string
	Task      *task.Task
	AgentName string
	Step      statefmt.ExecutionStep
	// Inputs are the outputs of the steps Step depends on, in its dependency order.
	Inputs []StepInput
	// Attempt counts from 1; attempts cut short by a crash or a pause are not counted.
	Attempt   int
	Workspace string
	Tools     ToolCaller
	Clock     clock.Clock
	// ReportTokens charges model tokens the agent used to the harness's token budget.
	ReportTokens func(n int64)
	// ReportCost charges what the agent reported spending, in millionths of a US dollar, to
	// the harness's cost budget (nil on the direct path).
	ReportCost func(microUSD int64)
	// Resume is the loop snapshot the step's interrupted attempt saved last (nil: start afresh).
	Resume *statefmt.AgentLoopSnapshot
	// LogDir is where a driver keeps the live output of its iterations (package itlog);
	// empty: nowhere.
	LogDir string
	// InboxDir holds the messages humans sent the harness (package inbox); empty: none.
	InboxDir string
	// Host is the harness running the attempt; nil on the direct path, where nothing is saved,
	// no human can be asked and events go nowhere.
	Host Host
}

// Host is what a harness offers the attempt of a step it runs. StepContext's methods of the
// same names call it, and do the direct path's thing without one.
type Host interface {
	// Save makes the attempt's progress durable with loop as its snapshot (StepContext.Save).
	Save(loop *statefmt.AgentLoopSnapshot) error
	// SaveDue reports, once, that Dream Mode asks for a save (StepContext.SaveDue).
	SaveDue() bool
	// AskHuman asks a human whether the attempt may go on (StepContext.AskHuman).
	AskHuman(kind, why string) error
	// CountIteration counts one agent iteration (StepContext.CountIteration).
	CountIteration()
	// Emit queues an event for the attempt (StepContext.Emit).
	Emit(e event.Event)
	// OverBudget reports a used-up token, cost or wall-clock budget, or nil.
	OverBudget() *BudgetError
}

// CheckBudget returns a *BudgetError when the harness's token, cost or wall-clock budget is used up
// (counting what the attempt reported so far): an agent checks it before an expensive request
// and returns the error as it is (the harness then asks a human or fails, by autonomy).
func (sc *StepContext) CheckBudget() error {
	if sc.Host == nil {
		return nil
	}
	if be := sc.Host.OverBudget(); be != nil {
		return be
	}
	return nil
}

// Save makes the attempt's progress durable: the tool calls made so far join the history, the
// tokens reported join the budget, queued events are written, and loop becomes the harness's
// agent-loop snapshot. After a crash or a pause the step's next attempt gets loop as Resume and
// goes on from there. On the direct path nothing is persisted and Save does nothing.
func (sc *StepContext) Save(loop *statefmt.AgentLoopSnapshot) error {
	if sc.Host == nil {
		return nil
	}
	return sc.Host.Save(loop)
}

// SaveDue reports whether Dream Mode asks for a save (once per interval without one): a driver
// that can stop at a safe point then calls Save with a snapshot it can resume from.
func (sc *StepContext) SaveDue() bool {
	return sc.Host != nil && sc.Host.SaveDue()
}

// AskHuman asks a human whether the attempt may go on; kind ("hook:...", "doom_loop:...")
// identifies the question within the step. It returns nil once a human approved it (an
// approval covers the question for the rest of the step), a *RejectedError once one rejected
// it, and otherwise opens a gate and returns an error that the agent must return at once: the
// harness pauses, durably, and the step resumes (from its last Save) after the decision.
func (sc *StepContext) AskHuman(kind, why string) error {
	if sc.Host == nil {
		return &StepError{Msg: fmt.Sprintf("%s needs a human's decision, and the direct path cannot wait for one: %s", kind, why)}
	}
	return sc.Host.AskHuman(kind, why)
}

// CountIteration counts one agent iteration (a CLI agent's run, a model turn) in the harness's
// iteration counter. An attempt whose agent counts none counts as one.
func (sc *StepContext) CountIteration() {
	if sc.Host != nil {
		sc.Host.CountIteration()
	}
}

// Emit queues an event; it is written with the next Save or when the attempt ends.
func (sc *StepContext) Emit(e event.Event) {
	if sc.Host != nil {
		sc.Host.Emit(e)
	}
}

// RejectedError is a human's no to an AskHuman question.
type RejectedError struct {
	GateID string
	Reason string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("gate %s rejected it: %s", e.GateID, e.Reason)
}

// PauseError is returned by an agent that must stop until a human looked (a circuit breaker
// that opened): the harness pauses with Reason, keeping the step's snapshot, and resume goes on.
type PauseError struct{ Reason string }

func (e *PauseError) Error() string { return e.Reason }

// StepPrompt is what a step asks of its agent: the task's prompt, the step, and the outputs of
// the steps it depends on.
func StepPrompt(sc *StepContext) string {
	var b strings.Builder
	if sc.Task != nil && sc.Task.Prompt != "" {
		fmt.Fprintf(&b, "Task: %s\n\n", strings.TrimSpace(sc.Task.Prompt))
	}
	fmt.Fprintf(&b, "Step %s: %s\n", sc.Step.ID, sc.Step.Description)
	for _, d := range sc.Inputs {
		fmt.Fprintf(&b, "\nOutput of step %s:\n%s\n", d.StepID, d.Output)
	}
	return b.String()
}

// StepInput is the output of a step the running step depends on.
type StepInput struct {
	StepID string
	Output string
}

// StepError is a failed step attempt.
type StepError struct {
	Transient bool
	Msg       string
}

func (e *StepError) Error() string { return e.Msg }

// IsTransient reports whether err is a transient failure.
func IsTransient(err error) bool {
	var se *StepError
	return errors.As(err, &se) && se.Transient
}

// ToolCaller runs tool calls for an agent: permission and budget checks, retries, timeouts, the
// side-effect journal, and the call's record in the harness's history and events.
type ToolCaller interface {
	Call(ctx context.Context, name string, args map[string]any) (statefmt.ToolResult, error)
}

// BudgetError is a call (or step) refused because a harness budget is used up.
type BudgetError struct {
	Budget Budget
	Msg    string
}

func (e *BudgetError) Error() string { return e.Msg }

// Budget names a harness budget. The strings are stable: budget gates' kinds carry them.
type Budget uint8

const (
	BudgetToolCalls Budget = iota + 1
	BudgetTokens
	BudgetWallClock
	BudgetCost
)

var budgetNames = [...]string{BudgetToolCalls: "toolCalls", BudgetTokens: "tokens", BudgetWallClock: "wallClock", BudgetCost: "costUSD"}

func (b Budget) String() string {
	if int(b) < len(budgetNames) && budgetNames[b] != "" {
		return budgetNames[b]
	}
	return fmt.Sprintf("budget(%d)", uint8(b))
}

// Tail is the last n bytes of s (at a UTF-8 boundary), marked when cut.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ { // skip a split rune
		if s[i]&0xC0 != 0x80 {
			s = s[i:]
			break
		}
	}
	return "…" + s
}
