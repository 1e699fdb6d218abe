package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/tools"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// TaskOutput is the one result format of a task, whichever path ran it.
type TaskOutput struct {
	TaskID    string          `json:"taskId"`
	HarnessID string          `json:"harnessId,omitempty"` // empty on the direct path
	Path      string          `json:"path"`                // "harness" or "direct"
	Status    statefmt.Status `json:"status"`
	Reason    string          `json:"reason,omitempty"`
	// Output is the output of the plan's last steps (those nothing depends on), in plan order.
	Output      string       `json:"output"`
	Steps       []StepOutput `json:"steps"`
	ToolCalls   int          `json:"toolCalls"`
	Checkpoints int          `json:"checkpoints"`
	// DurationMs is how long the harness ran, over all its runs: the time it waited paused (at a
	// gate, for a human, for a resume) does not count. A state that does not record its
	// running time (one imported from elsewhere) gives the time from its creation to its last
	// change.
	DurationMs float64 `json:"durationMs"`
}

// StepOutput is one step's outcome.
type StepOutput struct {
	ID       string              `json:"id"`
	Agent    string              `json:"agent"`
	Status   statefmt.StepStatus `json:"status"`
	Attempts int                 `json:"attempts"`
	Output   *string             `json:"output,omitempty"`
	Error    *string             `json:"error,omitempty"`
}

// runningTime is how long the harness of st ran (TaskOutput.DurationMs): the wall clock its
// budget is charged at every checkpoint while it runs, never while it is paused. A state that
// records none (imported from elsewhere, or without a budget) gives its whole life.
func runningTime(st *statefmt.HarnessState) time.Duration {
	if st.Budget != nil && st.Budget.WallClockUsed > 0 {
		return st.Budget.WallClockUsed
	}
	return st.UpdatedAt.Sub(st.CreatedAt)
}

// OutputOf reports a harness state in the task-output format.
func OutputOf(st *statefmt.HarnessState, path string) TaskOutput {
	o := TaskOutput{TaskID: st.TaskID, HarnessID: st.HarnessID, Path: path, Status: st.Status, Reason: st.StatusReason,
		ToolCalls: st.TotalToolCalls, Checkpoints: st.CheckpointCount, Steps: []StepOutput{},
		DurationMs: event.Ms(runningTime(st))}
	if st.Plan == nil {
		return o
	}
	depended := map[string]bool{}
	for _, s := range st.Plan.Steps {
		for _, d := range s.Dependencies {
			depended[d] = true
		}
	}
	var last []string
	for _, s := range st.Plan.Steps {
		o.Steps = append(o.Steps, StepOutput{ID: s.ID, Agent: s.AssignedAgent, Status: s.Status, Attempts: s.Attempts, Output: s.Output, Error: s.Error})
		if !depended[s.ID] && s.Output != nil {
			last = append(last, *s.Output)
		}
	}
	o.Output = strings.Join(last, "\n")
	return o
}

// Dispatch runs a task the way the Ralph loop does: a long-running task in a durable harness,
// any other by calling its agent directly (no harness, no checkpoint). Both report a TaskOutput.
func (m *Manager) Dispatch(ctx context.Context, t *task.Task) (TaskOutput, error) {
	if t.LongRunning != nil && !*t.LongRunning {
		return runDirect(ctx, t, m.clock, m.hooks)
	}
	h, err := m.Create(t)
	if err != nil {
		return TaskOutput{}, err
	}
	err = h.Run(ctx)
	return h.Output("harness"), err
}

// RunDirect runs a task's plan by calling its agents directly: nothing is persisted, no event
// is emitted, each step runs once (a failure fails the task). Tool permissions, budgets,
// retries and timeouts still apply; a plan with a step that needs a human gate is refused.
func RunDirect(ctx context.Context, t *task.Task, clk clock.Clock) (TaskOutput, error) {
	return runDirect(ctx, t, clk, tools.Hooks{})
}

func runDirect(ctx context.Context, t *task.Task, clk clock.Clock, hooks tools.Hooks) (TaskOutput, error) {
	ws, err := LockWorkspace(t, "")
	if err != nil {
		return TaskOutput{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	defer ws.Release()
	start := clk.Now()
	known := func(a string) bool { _, ok := t.Agents[a]; return ok }
	agents := map[string]agent.Agent{}
	get := func(name string) (agent.Agent, error) {
		if a, ok := agents[name]; ok {
			return a, nil
		}
		a, err := newAgent(name, t.Agents[name])
		if err == nil {
			agents[name] = a
		}
		return a, err
	}
	st := &statefmt.HarnessState{TaskID: t.ID, Status: statefmt.StatusRunning, CreatedAt: start}
	finish := func(status statefmt.Status, reason string) (TaskOutput, error) {
		st.Status, st.StatusReason, st.UpdatedAt = status, reason, clk.Now()
		return OutputOf(st, "direct"), nil
	}
	steps := t.Plan
	if len(steps) == 0 {
		a, err := get(t.Agent)
		if err != nil {
			return TaskOutput{}, err
		}
		if steps, err = a.Plan(ctx, &agent.PlanContext{Task: t, Clock: clk}); err != nil {
			return finish(statefmt.StatusFailed, "planning: "+err.Error())
		}
	}
	p, err := newPlan(t.ID, steps, known, start)
	if err != nil {
		return finish(statefmt.StatusFailed, err.Error())
	}
	st.Plan = p
	for _, s := range p.Steps {
		if gateRequired(t.Autonomy, s.Critical) {
			return TaskOutput{}, fmt.Errorf("task %s: step %s needs a human's approval at autonomy %d, and the direct path (longRunning: false) cannot wait for one: run it in a harness, or set autonomy 4 or 5",
				t.ID, s.ID, t.Autonomy)
		}
	}
	session := &tools.Direct{Limit: t.Budget.ToolCalls}
	x := indexPlan(p)
	for i := x.next(); i >= 0; i = x.next() {
		step := &p.Steps[i]
		a, err := get(step.AssignedAgent)
		if err != nil {
			return TaskOutput{}, err
		}
		calls := &tools.Pipeline{Task: t, Clock: clk, Hooks: hooks, StepID: step.ID, Agent: step.AssignedAgent, Session: session}
		out, err := a.RunStep(ctx, &agent.StepContext{Task: t, AgentName: step.AssignedAgent, Step: *step, Attempt: 1,
			Inputs: stepInputs(x, step), Workspace: t.Workspace.Path, Tools: calls, Clock: clk})
		step.Attempts = 1
		if ctx.Err() != nil {
			return TaskOutput{}, ctx.Err()
		}
		if err != nil {
			x.fail(step.ID, err.Error())
			continue
		}
		x.complete(step.ID, out)
	}
	st.TotalToolCalls = session.Calls
	if !planDone(p) {
		return finish(statefmt.StatusFailed, failureReason(p))
	}
	return finish(statefmt.StatusCompleted, "")
}
