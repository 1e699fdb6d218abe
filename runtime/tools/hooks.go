package tools

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/proc"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// HookDecision is what a pre-tool hook says about a call.
type HookDecision string

const (
	// HookContinue lets the call run.
	HookContinue HookDecision = "continue"
	// HookBlock refuses the call unexecuted; the agent is told the reason.
	HookBlock HookDecision = "block"
	// HookInterrupt pauses the harness durably at a gate; a human approves the call (it runs)
	// or rejects it (it is blocked).
	HookInterrupt HookDecision = "interrupt"
)

// ToolRequest is a tool call as hooks see it.
type ToolRequest struct {
	HarnessID string             `json:"harnessId,omitempty"`
	StepID    string             `json:"stepId,omitempty"`
	Agent     string             `json:"agent"`
	Tool      string             `json:"tool"`
	Arguments statefmt.JSONValue `json:"arguments"`
}

// PreToolHook decides about a call before it runs, with a reason for block and interrupt.
type PreToolHook func(ctx context.Context, req ToolRequest) (HookDecision, string)

// PostToolHook sees a call's result after it ran.
type PostToolHook func(ctx context.Context, req ToolRequest, res statefmt.ToolResult)

// Hooks run around every tool call: the Go hooks of Options.Hooks, then the task file's shell
// hooks. The first pre-hook that does not say continue decides.
type Hooks struct {
	Pre  []PreToolHook
	Post []PostToolHook
}

// preTool runs the pre-hooks of a call: Go hooks first, then the task's shell hooks that apply.
func preTool(ctx context.Context, goHooks Hooks, t *task.Task, clk clock.Clock, req ToolRequest) (HookDecision, string) {
	for _, h := range goHooks.Pre {
		if d, why := h(ctx, req); d != HookContinue && d != "" {
			return d, why
		}
	}
	for i, hc := range t.Hooks.PreTool {
		if len(hc.Tools) > 0 && !slices.Contains(hc.Tools, req.Tool) {
			continue
		}
		if d, why := runShellPreHook(ctx, t, clk, hc, req); d != HookContinue {
			return d, fmt.Sprintf("hooks.preTool[%d] %s: %s", i, hc.Command[0], why)
		}
	}
	return HookContinue, ""
}

// postTool runs the post-hooks of a call; it returns the failures of shell hooks (for warnings).
func postTool(ctx context.Context, goHooks Hooks, t *task.Task, clk clock.Clock, req ToolRequest, res statefmt.ToolResult) []string {
	for _, h := range goHooks.Post {
		h(ctx, req, res)
	}
	var errs []string
	for i, hc := range t.Hooks.PostTool {
		if len(hc.Tools) > 0 && !slices.Contains(hc.Tools, req.Tool) {
			continue
		}
		in, _ := json.Marshal(struct {
			Event string `json:"event"`
			ToolRequest
			Result statefmt.ToolResult `json:"result"`
		}{"postTool", req, res})
		if _, _, err := runHook(ctx, t, clk, hc, in); err != nil {
			errs = append(errs, fmt.Sprintf("hooks.postTool[%d] %s: %v", i, hc.Command[0], err))
		}
	}
	return errs
}

// ExitBlock is the exit code by which a shell pre-hook blocks a call (its stderr is the reason),
// as Claude Code's hooks do.
const ExitBlock = 2

// runShellPreHook runs one shell pre-hook. The call is on stdin as JSON; the hook answers by its
// exit code (0 continue, 2 block with stderr as the reason) or, exiting 0, by a JSON object
// {"decision": "continue"|"block"|"interrupt", "reason": "..."} on stdout. A hook that fails
// otherwise (another exit code, a timeout, an answer that is not one of those) blocks the call:
// a guard that cannot answer does not let calls through.
func runShellPreHook(ctx context.Context, t *task.Task, clk clock.Clock, hc task.HookConfig, req ToolRequest) (HookDecision, string) {
	in, _ := json.Marshal(struct {
		Event string `json:"event"`
		ToolRequest
	}{"preTool", req})
	stdout, stderr, err := runHook(ctx, t, clk, hc, in)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == ExitBlock:
		return HookBlock, cmp.Or(strings.TrimSpace(stderr), "blocked (exit 2)")
	case err != nil:
		return HookBlock, fmt.Sprintf("the hook failed, so the call is blocked: %v", err)
	}
	out := bytes.TrimSpace([]byte(stdout))
	if len(out) == 0 {
		return HookContinue, ""
	}
	var ans struct {
		Decision HookDecision `json:"decision"`
		Reason   string       `json:"reason"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ans); err != nil {
		return HookBlock, fmt.Sprintf("the hook's answer is not {\"decision\": ..., \"reason\": ...}, so the call is blocked: %v", err)
	}
	switch ans.Decision {
	case HookContinue, "":
		return HookContinue, ""
	case HookBlock, HookInterrupt:
		return ans.Decision, cmp.Or(ans.Reason, string(ans.Decision))
	}
	return HookBlock, fmt.Sprintf("the hook's decision %q is not continue, block or interrupt, so the call is blocked", ans.Decision)
}

// runHook runs a shell hook with in on stdin, in the workspace, in a clean environment and its
// own process group, within its timeout.
func runHook(ctx context.Context, t *task.Task, clk clock.Clock, hc task.HookConfig, in []byte) (stdout, stderr string, err error) {
	if err := os.MkdirAll(t.Workspace.Path, 0o755); err != nil {
		return "", "", fmt.Errorf("workspace: %w", err)
	}
	ctx, cancel := clock.WithTimeout(ctx, clk, hc.Timeout.Duration)
	defer cancel()
	cmd := exec.CommandContext(ctx, hc.Command[0], hc.Command[1:]...)
	cmd.Dir, cmd.Env = t.Workspace.Path, proc.CleanEnv(hc.Env)
	cmd.Stdin = bytes.NewReader(in)
	out, errOut := &proc.CapWriter{Max: 64 << 10}, &proc.CapWriter{Max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	err = proc.Run(ctx, cmd)
	if clock.TimedOut(ctx) {
		err = fmt.Errorf("timed out after %v", hc.Timeout.Duration)
	} else if err != nil && errOut.String() != "" {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ExitBlock {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut.String()))
		}
	}
	return out.String(), errOut.String(), err
}

// hookGateKind names the gate of an interrupted call: the tool and a hash of its arguments, so
// that an approval covers that call (and identical ones) for the rest of the step.
func hookGateKind(tool string, args statefmt.JSONValue) string {
	return fmt.Sprintf("hook:%s:%08x", tool, uint32(xxhash.Sum64(args)))
}
