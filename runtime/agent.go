package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
}

// StepContext is what an agent knows when it runs a step attempt.
type StepContext struct {
	HarnessID string
	Task      *task.Task
	AgentName string
	Step      statefmt.ExecutionStep
	// Attempt counts from 1; attempts cut short by a crash or a pause are not counted.
	Attempt   int
	Workspace string
	Tools     ToolCaller
	Clock     Clock
	// ReportTokens charges model tokens the agent used to the harness's token budget.
	ReportTokens func(n int64)
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
	default:
		return nil, fmt.Errorf("agent %s: the %s driver is not part of this build yet (available: script)", name, cfg.Driver)
	}
}

// scriptAgent runs the deterministic actions of a task file (SPEC section 8).
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
	var out []string
	for i, act := range actions {
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
	}
	return strings.Join(out, "\n"), nil
}
