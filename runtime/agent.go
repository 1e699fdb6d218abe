package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/harness-edge/harness-edge/statefmt/event"

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
	Clock     Clock
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
	Clock     Clock
	// ReportTokens charges model tokens the agent used to the harness's token budget.
	ReportTokens func(n int64)
	// Resume is the loop snapshot the step's interrupted attempt saved last (nil: start afresh).
	Resume *statefmt.AgentLoopSnapshot

	save func(*statefmt.AgentLoopSnapshot) error
	// saveDue is set by Dream Mode's timer when a save is due.
	saveDue *atomic.Bool
	ask     func(kind, why string) error
	emit    func(event.Event)
	count   func()
	// budget reports a used-up token or wall-clock budget.
	budget func() *BudgetError
}

// CheckBudget returns a *BudgetError when the harness's token or wall-clock budget is used up
// (counting what the attempt reported so far): an agent checks it before an expensive request
// and returns the error as it is (the harness then asks a human or fails, by autonomy).
func (sc *StepContext) CheckBudget() error {
	if sc.budget == nil {
		return nil
	}
	if be := sc.budget(); be != nil {
		return be
	}
	return nil
}

// Save makes the attempt's progress durable: the tool calls made so far join the history, the
// tokens reported join the budget, queued events are written, and loop becomes the harness's
// agent-loop snapshot. After a crash or a pause the step's next attempt gets loop as Resume and
// goes on from there. On the direct path nothing is persisted and Save does nothing.
func (sc *StepContext) Save(loop *statefmt.AgentLoopSnapshot) error {
	if sc.save == nil {
		return nil
	}
	return sc.save(loop)
}

// SaveDue reports whether Dream Mode asks for a save (once per interval without one): a driver
// that can stop at a safe point then calls Save with a snapshot it can resume from.
func (sc *StepContext) SaveDue() bool {
	return sc.saveDue != nil && sc.saveDue.Swap(false)
}

// AskHuman asks a human whether the attempt may go on; kind ("hook:...", "doom_loop:...")
// identifies the question within the step. It returns nil once a human approved it (an
// approval covers the question for the rest of the step), a *RejectedError once one rejected
// it, and otherwise opens a gate and returns an error that the agent must return at once: the
// harness pauses, durably, and the step resumes (from its last Save) after the decision.
func (sc *StepContext) AskHuman(kind, why string) error {
	if sc.ask == nil {
		return &StepError{Msg: fmt.Sprintf("%s needs a human's decision, and the direct path cannot wait for one: %s", kind, why)}
	}
	return sc.ask(kind, why)
}

// CountIteration counts one agent iteration (a CLI agent's run, a model turn) in the harness's
// iteration counter. An attempt whose agent counts none counts as one.
func (sc *StepContext) CountIteration() {
	if sc.count != nil {
		sc.count()
	}
}

// Emit queues an event; it is written with the next Save or when the attempt ends.
func (sc *StepContext) Emit(e event.Event) {
	if sc.emit != nil {
		sc.emit(e)
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

// isTransient reports whether err is a transient failure.
func isTransient(err error) bool {
	var se *StepError
	return errors.As(err, &se) && se.Transient
}

// NewAgent makes the agent named name from its configuration.
func NewAgent(name string, cfg *task.Agent) (Agent, error) {
	switch cfg.Driver {
	case "script":
		return &scriptAgent{name: name, script: cfg.Script}, nil
	case "command":
		return newCommandAgent(name, cfg)
	case "openai":
		return newOpenAIAgent(name, cfg), nil
	default:
		return nil, fmt.Errorf("agent %s: the %s driver is not part of this build (available: %v)", name, cfg.Driver, task.Drivers)
	}
}

// scriptAgent runs the deterministic actions of a task file.
type scriptAgent struct {
	name   string
	script *task.Script
}

func (a *scriptAgent) Plan(_ context.Context, pc *PlanContext) ([]task.PlanStep, error) {
	if len(a.script.Plan) == 0 {
		return nil, fmt.Errorf("agent %s: the task declares no plan and the agent's script has none", a.name)
	}
	return a.script.Plan, nil
}

func (a *scriptAgent) RunStep(ctx context.Context, sc *StepContext) (string, error) {
	actions, ok := a.script.Steps[sc.Step.ID]
	if !ok {
		actions, ok = a.script.Steps["*"]
	}
	if !ok {
		return "", &StepError{Msg: fmt.Sprintf("agent %s: the script has no actions for step %s (and no \"*\" entry)", a.name, sc.Step.ID)}
	}
	// A Dream Mode save records how many actions are done and their output; a resumed attempt
	// goes on after them (their tool calls are in the history already).
	var progress scriptProgress
	if r := sc.Resume; r != nil && len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &progress); err != nil || progress.Done > len(actions) {
			return "", &StepError{Msg: fmt.Sprintf("agent %s: step %s: the saved script progress does not fit the script (%s)", a.name, sc.Step.ID, r.Data)}
		}
	}
	out := progress.Output
	for i := progress.Done; i < len(actions); i++ {
		act := actions[i]
		switch act.Kind() {
		case "tool":
			res, err := sc.Tools.Call(ctx, act.Tool, act.Args)
			if err != nil {
				return "", err
			}
			if res.Output != "" {
				out = append(out, strings.TrimRight(res.Output, "\n"))
			}
		case "sleep":
			if err := sc.Clock.Sleep(ctx, act.Sleep.Duration); err != nil {
				return "", err
			}
		case "output":
			out = append(out, *act.Output)
		case "promise":
			out = append(out, "<promise>"+act.Promise+"</promise>")
		case "tokens":
			if sc.ReportTokens != nil {
				sc.ReportTokens(act.Tokens)
			}
		case "fail":
			if act.Times == 0 || sc.Attempt <= act.Times {
				msg := act.Message
				if msg == "" {
					msg = fmt.Sprintf("script action %d failed (%s)", i, act.Fail)
				}
				return "", &StepError{Transient: act.Fail == "transient", Msg: msg}
			}
		}
		if sc.SaveDue() {
			data, _ := json.Marshal(scriptProgress{Done: i + 1, Output: out})
			if err := sc.Save(&statefmt.AgentLoopSnapshot{Iteration: i + 1, Data: data}); err != nil {
				return "", err
			}
		}
	}
	return strings.Join(out, "\n"), nil
}

// scriptProgress is the script driver's loop snapshot: actions done and the output so far.
type scriptProgress struct {
	Done   int      `json:"done"`
	Output []string `json:"output,omitempty"`
}
