package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// ToolCaller runs tool calls for an agent: permission and budget checks, retries, timeouts, the
// side-effect journal, and the call's record in the harness's history and events.
type ToolCaller interface {
	Call(ctx context.Context, name string, args map[string]any) (statefmt.ToolResult, error)
}

// BudgetError is a call (or step) refused because a harness budget is used up.
type BudgetError struct {
	// Budget is "toolCalls", "tokens" or "wallClock".
	Budget string
	Msg    string
}

func (e *BudgetError) Error() string { return e.Msg }

// toolSettings returns the settings of a tool: the task's entry, or the defaults for a built-in
// without one.
func toolSettings(t *task.Task, name string) *task.ToolConfig {
	if tc, ok := t.Tools[name]; ok {
		return tc
	}
	return &task.ToolConfig{MaxOutput: task.DefaultMaxOutput}
}

// permission refuses a call the agent may not make. (Every tool an agent lists exists: the
// task file is refused otherwise.)
func permission(t *task.Task, agent, name string) *statefmt.ToolResult {
	if tools := t.Agents[agent].Tools; !slices.Contains(tools, name) {
		res := failed("permission", "agent %s may not call %s (its tools: %v)", agent, name, tools)
		return &res
	}
	return nil
}

// runOnce runs one try of a tool, with its timeout when it has one.
func runOnce(ctx context.Context, t *task.Task, clock Clock, name string, args map[string]any) statefmt.ToolResult {
	env := toolEnv{workspace: t.Workspace, cfg: toolSettings(t, name), clock: clock}
	if len(env.cfg.Command) > 0 {
		return runCommandTool(ctx, env, args)
	}
	if d := env.cfg.Timeout.Duration; d > 0 && name != "bash" {
		var cancel context.CancelFunc
		ctx, cancel = withTimeout(ctx, clock, d)
		defer cancel()
		res := runBuiltin(ctx, env, name, args)
		if timedOut(ctx) {
			return failed("timeout", "timed out after %v", d)
		}
		return res
	}
	return runBuiltin(ctx, env, name, args)
}

// runWithRetries runs a tool, retrying transient failures up to the task's retry limit with
// exponential backoff on the injected clock. It returns the last result and how many retries
// it took. A cancelled ctx ends it at once.
func runWithRetries(ctx context.Context, t *task.Task, clock Clock, name string, args map[string]any) (statefmt.ToolResult, int) {
	var delay time.Duration
	for retries := 0; ; retries++ {
		res := runOnce(ctx, t, clock, name, args)
		if res.Success || res.ErrorKind != "transient" || retries >= t.Retry.Retries() || ctx.Err() != nil {
			return res, retries
		}
		delay = nextDelay(t.Retry, delay, rand.Float64())
		if clock.Sleep(ctx, delay) != nil {
			return res, retries
		}
	}
}

// nextDelay is the wait before the next retry, given the previous one (0 before the first) and
// a jitter draw in [0, 1): about Base first, then Factor times the previous wait; jitter adds up
// to 20% and never takes away, so each wait is at least Factor (≥ 2) times the one before, up to
// MaxDelay.
func nextDelay(r task.RetryConfig, prev time.Duration, jitter float64) time.Duration {
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
// refusal gives a *BudgetError, from the caller.)
func toolError(ctx context.Context, name string, res statefmt.ToolResult) error {
	if res.Success {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return &StepError{Msg: fmt.Sprintf("tool %s: %s", name, res.Error)}
}

// toolCaller is the ToolCaller of one step attempt in a harness.
type toolCaller struct {
	h     *Harness
	cur   *attemptState
	agent string
}

func (c *toolCaller) Call(ctx context.Context, name string, args map[string]any) (statefmt.ToolResult, error) {
	h := c.h
	start := h.now()
	if args == nil {
		args = map[string]any{}
	}
	argsJSON, err := statefmt.JSONOf(args)
	if err != nil {
		res := failed("permanent", "arguments are not JSON: %v", err)
		return res, toolError(ctx, name, res)
	}
	record := func(res statefmt.ToolResult, retries int, executed bool) {
		h.recordToolCall(c.cur, statefmt.ToolCallRecord{CallName: name, Arguments: argsJSON, Result: res,
			Duration: max(h.now().Sub(start), time.Nanosecond), RetryCount: retries, Timestamp: start}, executed)
	}
	if res := permission(h.task, c.agent, name); res != nil {
		record(*res, 0, false)
		return *res, toolError(ctx, name, *res)
	}
	req := ToolRequest{HarnessID: h.ID(), StepID: c.cur.step, Agent: c.agent, Tool: name, Arguments: argsJSON}
	switch d, why := preTool(ctx, h.m.hooks, h.task, h.m.clock, req); d {
	case HookBlock:
		res := failed("blocked", "blocked by a hook: %s", why)
		record(res, 0, false)
		return res, toolError(ctx, name, res)
	case HookInterrupt:
		var rejected *RejectedError
		h.mu.Lock()
		err := h.askLocked(c.cur.step, hookGateKind(name, argsJSON), fmt.Sprintf("a hook interrupted %s %s: %s", name, argsJSON, why))
		h.mu.Unlock()
		switch {
		case errors.As(err, &rejected):
			res := failed("blocked", "a human rejected this call at gate %s: %s", rejected.GateID, rejected.Reason)
			record(res, 0, false)
			return res, toolError(ctx, name, res)
		case err != nil:
			return failed("permanent", "%v", err), err
		}
	}
	if be := h.overBudget(c.cur); be != nil {
		res := failed("budget", "%s", be.Msg)
		record(res, 0, false)
		return res, be
	}
	cfg := toolSettings(h.task, name)
	var entry int = -1
	if cfg.SideEffects {
		var res *statefmt.ToolResult
		entry, res, err = h.journalIntent(c.cur, name, argsJSON, cfg.Replay)
		if err != nil {
			return failed("permanent", "%v", err), err
		}
		if res != nil { // answered from the journal: the call is not run again
			record(*res, 0, false)
			return *res, toolError(ctx, name, *res)
		}
	}
	res, retries := runWithRetries(ctx, h.task, h.m.clock, name, args)
	if ctx.Err() != nil {
		return res, ctx.Err() // cut short: the attempt is put back whole
	}
	if retries > 0 && !res.Success && res.ErrorKind == "transient" {
		res.Error = fmt.Sprintf("%s (after %d retries)", res.Error, retries)
	}
	if entry >= 0 {
		if err := h.journalReceipt(entry, res); err != nil {
			return res, err
		}
	}
	for _, msg := range postTool(ctx, h.m.hooks, h.task, h.m.clock, req, res) {
		h.mu.Lock()
		c.cur.events = append(c.cur.events, event.Event{Type: event.Warning, HarnessID: h.ID(), Time: h.now(), StepID: c.cur.step, Tool: name, Message: msg})
		h.mu.Unlock()
	}
	record(res, retries, true)
	return res, toolError(ctx, name, res)
}

// directTools runs tool calls for the direct path: the same permission and budget checks,
// retries and timeouts as in a harness; nothing is recorded or journaled.
type directTools struct {
	t     *task.Task
	hooks Hooks
	clock Clock
	agent string
	calls int
}

func (d *directTools) Call(ctx context.Context, name string, args map[string]any) (statefmt.ToolResult, error) {
	if res := permission(d.t, d.agent, name); res != nil {
		return *res, toolError(ctx, name, *res)
	}
	if limit := d.t.Budget.ToolCalls; limit > 0 && d.calls >= limit {
		be := &BudgetError{Budget: "toolCalls", Msg: fmt.Sprintf("the task has used its budget of %d tool calls", limit)}
		return failed("budget", "%s", be.Msg), be
	}
	argsJSON, err := statefmt.JSONOf(args)
	if err != nil {
		res := failed("permanent", "arguments are not JSON: %v", err)
		return res, toolError(ctx, name, res)
	}
	req := ToolRequest{Agent: d.agent, Tool: name, Arguments: argsJSON}
	switch dec, why := preTool(ctx, d.hooks, d.t, d.clock, req); dec {
	case HookBlock:
		res := failed("blocked", "blocked by a hook: %s", why)
		return res, toolError(ctx, name, res)
	case HookInterrupt:
		res := failed("blocked", "a hook asks a human about this call (%s), and the direct path cannot wait for one", why)
		return res, toolError(ctx, name, res)
	}
	d.calls++
	res, _ := runWithRetries(ctx, d.t, d.clock, name, args)
	postTool(ctx, d.hooks, d.t, d.clock, req, res) // nothing to warn into on the direct path
	return res, toolError(ctx, name, res)
}
