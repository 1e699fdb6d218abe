// Package tools is the tool pipeline every agent's calls go through, on the durable path and
// the direct one alike: permission, hooks, budget, the side-effect journal, retries with
// backoff, timeouts, and the built-in tools (file tools confined to the workspace, bash with
// allow/deny rules, user-defined command tools).
package tools

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Settings returns the settings of a tool: the task's entry, or the defaults for a built-in
// without one.
func Settings(t *task.Task, name string) *task.ToolConfig {
	if tc, ok := t.Tools[name]; ok {
		return tc
	}
	if slices.Contains(GitTools, name) {
		return gitSettings(name)
	}
	return &task.ToolConfig{MaxOutput: task.DefaultMaxOutput}
}

// permission refuses a call the agent may not make. (Every tool an agent lists exists: the
// task file is refused otherwise.)
func permission(t *task.Task, agent, name string) *statefmt.ToolResult {
	if tools := t.Agents[agent].Tools; !slices.Contains(tools, name) {
		res := Failed(statefmt.ErrorPermission, "agent %s may not call %s (its tools: %v)", agent, name, tools)
		return &res
	}
	return nil
}

// runOnce runs one try of a tool, with its timeout when it has one.
func runOnce(ctx context.Context, t *task.Task, clk clock.Clock, name string, args map[string]any) statefmt.ToolResult {
	env := toolEnv{workspace: t.Workspace.Path, cfg: Settings(t, name), clock: clk}
	if len(env.cfg.Command) > 0 {
		return runCommandTool(ctx, env, args)
	}
	if d := env.cfg.Timeout.Duration; d > 0 && name != "bash" {
		var cancel context.CancelFunc
		ctx, cancel = clock.WithTimeout(ctx, clk, d)
		defer cancel()
		res := runBuiltin(ctx, env, name, args)
		if clock.TimedOut(ctx) {
			return Failed(statefmt.ErrorTimeout, "timed out after %v", d)
		}
		return res
	}
	return runBuiltin(ctx, env, name, args)
}

// runWithRetries runs a tool, retrying transient failures up to the task's retry limit with
// exponential backoff on the injected clock. It returns the last result and how many retries
// it took. A cancelled ctx ends it at once.
func runWithRetries(ctx context.Context, t *task.Task, clk clock.Clock, name string, args map[string]any) (statefmt.ToolResult, int) {
	var delay time.Duration
	for retries := 0; ; retries++ {
		res := runOnce(ctx, t, clk, name, args)
		if res.Success || res.ErrorKind != statefmt.ErrorTransient || retries >= t.Retry.Retries() || ctx.Err() != nil {
			return res, retries
		}
		delay = NextDelay(t.Retry, delay, rand.Float64())
		if clk.Sleep(ctx, delay) != nil {
			return res, retries
		}
	}
}

// NextDelay is the wait before the next retry, given the previous one (0 before the first) and
// a jitter draw in [0, 1): about Base first, then Factor times the previous wait; jitter adds up
// to 20% and never takes away, so each wait is at least Factor (≥ 2) times the one before, up to
// MaxDelay.
func NextDelay(r task.RetryConfig, prev time.Duration, jitter float64) time.Duration {
	d := float64(r.Base.Duration)
	if prev > 0 {
		d = float64(prev) * r.Factor
	}
	d *= 1 + 0.2*jitter
	if m := r.MaxDelay.Duration; m > 0 && d > float64(m) {
		return m
	}
	return time.Duration(d)
}

// toolError is the step error a failed call gives: permanent (the tool's retries are spent, or
// it was refused), except for a call cut short, which gives the context's error. (A budget
// refusal gives a *agent.BudgetError, from the session.)
func toolError(ctx context.Context, name string, res statefmt.ToolResult) error {
	if res.Success {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return &agent.StepError{Msg: fmt.Sprintf("tool %s: %s", name, res.Error)}
}

// Session is what the pipeline needs from whoever runs an attempt's calls: a step attempt in a
// durable harness, or the direct path.
type Session interface {
	// Record records a call's outcome; executed says whether it ran (refusals are recorded but
	// not counted against the budget).
	Record(r statefmt.ToolCallRecord, executed bool)
	// CallOverBudget refuses a call when the tool-call budget (or another) is used up.
	CallOverBudget() *agent.BudgetError
	// AskHuman asks about a call a hook interrupted: nil once approved, an *agent.RejectedError
	// once rejected, an *agent.StepError where nobody can be asked, and otherwise the error
	// that suspends the attempt at a gate.
	AskHuman(kind, why string) error
	// Intent journals a side-effecting call before it runs. A non-nil result answers the call
	// from the journal (it is not run again); entry numbers the journal entry for Receipt, or is
	// negative when nothing is journaled.
	Intent(tool string, args statefmt.JSONValue, replay string) (entry int, answer *statefmt.ToolResult, err error)
	// Receipt records a journaled call's result.
	Receipt(entry int, res statefmt.ToolResult) error
	// Warn records a warning about a call (a post-hook's failure).
	Warn(tool, msg string)
	// Durable waits until every checkpoint of the harness is durable: a call that may reach
	// outside the process (reachesOutside) does not run before the step before it is on the
	// disk.
	Durable() error
}

// readers are the built-in tools that change nothing outside the process.
var readers = []string{"read_file", "glob", "grep", "git_status", "git_diff", "git_log"}

// reachesOutside says whether a call of the tool, with its settings, may change something
// outside the process: every tool but the built-in readers, and a reader the task gave a
// command of its own or marked as having side effects.
func reachesOutside(name string, cfg *task.ToolConfig) bool {
	return !slices.Contains(readers, name) || len(cfg.Command) > 0 || cfg.SideEffects
}

// Pipeline runs one agent's tool calls within a step attempt. It is the agent.ToolCaller the
// drivers get.
type Pipeline struct {
	Task      *task.Task
	Clock     clock.Clock
	Hooks     Hooks
	HarnessID string // empty on the direct path
	StepID    string
	Agent     string
	Session   Session
}

// Call runs a tool call through the whole pipeline: arguments, permission, pre-hooks, budget,
// the side-effect journal, retries and timeouts, post-hooks, and the call's record.
func (p *Pipeline) Call(ctx context.Context, name string, args map[string]any) (statefmt.ToolResult, error) {
	start := p.Clock.Now()
	if args == nil {
		args = map[string]any{}
	}
	argsJSON, err := statefmt.JSONOf(args)
	if err != nil {
		res := Failed(statefmt.ErrorPermanent, "arguments are not JSON: %v", err)
		return res, toolError(ctx, name, res)
	}
	record := func(res statefmt.ToolResult, retries int, executed bool) {
		p.Session.Record(statefmt.ToolCallRecord{CallName: name, Arguments: argsJSON, Result: res,
			Duration: statefmt.Span(p.Clock.Now().Sub(start)), RetryCount: retries, Timestamp: statefmt.Instant(start)}, executed)
	}
	refuse := func(res statefmt.ToolResult) (statefmt.ToolResult, error) {
		record(res, 0, false)
		return res, toolError(ctx, name, res)
	}
	if res := permission(p.Task, p.Agent, name); res != nil {
		return refuse(*res)
	}
	req := ToolRequest{HarnessID: p.HarnessID, StepID: p.StepID, Agent: p.Agent, Tool: name, Arguments: argsJSON}
	switch d, why := preTool(ctx, p.Hooks, p.Task, p.Clock, req); d {
	case HookBlock:
		return refuse(Failed(statefmt.ErrorBlocked, "blocked by a hook: %s", why))
	case HookInterrupt:
		var rejected *agent.RejectedError
		var nobody *agent.StepError
		err := p.Session.AskHuman(hookGateKind(name, argsJSON), fmt.Sprintf("a hook interrupted %s %s: %s", name, argsJSON, why))
		switch {
		case errors.As(err, &rejected):
			return refuse(Failed(statefmt.ErrorBlocked, "a human rejected this call at gate %s: %s", rejected.GateID, rejected.Reason))
		case errors.As(err, &nobody):
			return refuse(Failed(statefmt.ErrorBlocked, "a hook asks a human about this call (%s), and the direct path cannot wait for one", why))
		case err != nil:
			return Failed(statefmt.ErrorPermanent, "%v", err), err
		}
	}
	if be := p.Session.CallOverBudget(); be != nil {
		res := Failed(statefmt.ErrorBudget, "%s", be.Msg)
		record(res, 0, false)
		return res, be
	}
	cfg := Settings(p.Task, name)
	if reachesOutside(name, cfg) {
		if err := p.Session.Durable(); err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", err), err
		}
	}
	entry := -1
	if cfg.SideEffects {
		var answer *statefmt.ToolResult
		entry, answer, err = p.Session.Intent(name, argsJSON, cfg.Replay)
		if err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", err), err
		}
		if answer != nil { // answered from the journal: the call is not run again
			return refuse(*answer)
		}
	}
	res, retries := runWithRetries(ctx, p.Task, p.Clock, name, args)
	if ctx.Err() != nil {
		return res, ctx.Err() // cut short: the attempt is put back whole
	}
	if retries > 0 && !res.Success && res.ErrorKind == statefmt.ErrorTransient {
		res.Error = fmt.Sprintf("%s (after %d retries)", res.Error, retries)
	}
	if entry >= 0 {
		if err := p.Session.Receipt(entry, res); err != nil {
			return res, err
		}
	}
	for _, msg := range postTool(ctx, p.Hooks, p.Task, p.Clock, req, res) {
		p.Session.Warn(name, msg)
	}
	record(res, retries, true)
	return res, toolError(ctx, name, res)
}

// Direct is the session of the direct path: nothing is recorded or journaled, nobody can be
// asked, and the task's tool-call budget counts the calls that ran.
type Direct struct {
	Limit int // the task's tool-call budget (0: none)
	Calls int // calls that ran
}

func (d *Direct) Record(_ statefmt.ToolCallRecord, executed bool) {
	if executed {
		d.Calls++
	}
}

func (d *Direct) CallOverBudget() *agent.BudgetError {
	if d.Limit > 0 && d.Calls >= d.Limit {
		return &agent.BudgetError{Budget: agent.BudgetToolCalls, Msg: "the task has used its budget of " + idlist.Of(d.Limit, "tool call")}
	}
	return nil
}

func (d *Direct) AskHuman(kind, why string) error {
	return &agent.StepError{Msg: fmt.Sprintf("%s needs a human's decision, and the direct path cannot wait for one: %s", kind, why)}
}

func (d *Direct) Intent(string, statefmt.JSONValue, string) (int, *statefmt.ToolResult, error) {
	return -1, nil, nil
}

func (d *Direct) Receipt(int, statefmt.ToolResult) error { return nil }

func (d *Direct) Warn(string, string) {} // nothing to warn into on the direct path

func (d *Direct) Durable() error { return nil } // the direct path checkpoints nothing
