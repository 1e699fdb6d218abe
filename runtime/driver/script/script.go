// Package script is the script driver: the deterministic actions a task file gives an agent
// (tool calls, outputs, failures, sleeps, tokens, promise text, a plan). Tests, demos and
// benchmarks use it; it needs no model.
package script

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// New makes the script agent named name.
func New(name string, s *task.Script) *Agent { return &Agent{name: name, script: s} }

// Agent runs the deterministic actions of a task file.
type Agent struct {
	name   string
	script *task.Script
}

func (a *Agent) Plan(_ context.Context, pc *agent.PlanContext) ([]task.PlanStep, error) {
	if len(a.script.Plan) == 0 {
		return nil, fmt.Errorf("agent %s: the task declares no plan and the agent's script has none", a.name)
	}
	return a.script.Plan, nil
}

func (a *Agent) RunStep(ctx context.Context, sc *agent.StepContext) (string, error) {
	actions, ok := a.script.Steps[sc.Step.ID]
	if !ok {
		actions, ok = a.script.Steps["*"]
	}
	if !ok {
		return "", &agent.StepError{Msg: fmt.Sprintf("agent %s: the script has no actions for step %s (and no \"*\" entry)", a.name, sc.Step.ID)}
	}
	// A Dream Mode save records how many actions are done and their output; a resumed attempt
	// goes on after them (their tool calls are in the history already).
	var progress scriptProgress
	if r := sc.Resume; r != nil && len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &progress); err != nil || progress.Done > len(actions) {
			return "", &agent.StepError{Msg: fmt.Sprintf("agent %s: step %s: the saved script progress does not fit the script (%s)", a.name, sc.Step.ID, r.Data)}
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
				return "", &agent.StepError{Transient: act.Fail == "transient", Msg: msg}
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
