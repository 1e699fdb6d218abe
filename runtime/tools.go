package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// ToolCaller runs tool calls for an agent: permission and budget checks, the call, and its
// record in the harness's history and events.
type ToolCaller interface {
	Call(ctx context.Context, name string, args map[string]any) (statefmt.ToolResult, error)
}

// MaxToolOutput caps a tool's captured output; more is cut and marked truncated.
const MaxToolOutput = 64 << 10

// Builtins are the built-in tools (confined to the harness workspace).
var Builtins = []string{"read_file", "write_file"}

// toolCaller is the ToolCaller of one step attempt.
type toolCaller struct {
	h     *Harness
	agent string
}

func (t *toolCaller) Call(ctx context.Context, name string, args map[string]any) (statefmt.ToolResult, error) {
	h := t.h
	start := h.m.clock.Now()
	if args == nil {
		args = map[string]any{}
	}
	argsJSON, err := statefmt.JSONOf(args)
	if err != nil {
		argsJSON = statefmt.JSONValue(`{}`)
	}
	res := checkedCall(ctx, h.task, t.agent, h.toolCallsUsed(), name, args)
	h.recordToolCall(statefmt.ToolCallRecord{CallName: name, Arguments: argsJSON, Result: res,
		Duration: h.m.clock.Now().Sub(start), Timestamp: start})
	return res, toolError(ctx, name, res)
}

// checkedCall runs a tool call for agent unless the agent may not call the tool or the task's
// tool-call budget is used up (used calls so far); refusals come back as failed results.
func checkedCall(ctx context.Context, t *task.Task, agent string, used int, name string, args map[string]any) statefmt.ToolResult {
	tools := t.Agents[agent].Tools
	switch limit := t.Budget.ToolCalls; {
	case !slices.Contains(tools, name):
		return statefmt.ToolResult{ErrorKind: "permission", Error: fmt.Sprintf("agent %s may not call %s (its tools: %v)", agent, name, tools)}
	case limit > 0 && used >= limit:
		return statefmt.ToolResult{ErrorKind: "budget", Error: fmt.Sprintf("the harness has used its budget of %d tool calls", limit)}
	}
	return runTool(ctx, t, t.Workspace, name, args)
}

// toolError is the step error a failed call gives: transient when the tool said so, and the
// context's error when the call was cut short.
func toolError(ctx context.Context, name string, res statefmt.ToolResult) error {
	if res.Success {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return &StepError{Transient: res.ErrorKind == "transient", Msg: fmt.Sprintf("tool %s: %s", name, res.Error)}
}

// runTool runs a built-in or a task-defined command tool.
func runTool(ctx context.Context, t *task.Task, workspace, name string, args map[string]any) statefmt.ToolResult {
	if tc, ok := t.Tools[name]; ok {
		return runCommandTool(ctx, workspace, tc, args)
	}
	fail := func(kind, format string, a ...any) statefmt.ToolResult {
		return statefmt.ToolResult{ErrorKind: kind, Error: fmt.Sprintf(format, a...)}
	}
	str := func(key string) (string, bool) { v, ok := args[key].(string); return v, ok }
	num := func(key string) int {
		switch v := args[key].(type) {
		case int:
			return v
		case uint64:
			return int(v)
		case int64:
			return int(v)
		case float64:
			return int(v)
		}
		return 0
	}
	if !slices.Contains(Builtins, name) {
		return fail("permanent", "no tool %s (built-ins: %v; the task defines %d)", name, Builtins, len(t.Tools))
	}
	path, ok := str("path")
	if !ok || path == "" {
		return fail("permanent", "argument path (a string) is required")
	}
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return fail("permanent", "workspace: %v", err)
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return fail("permanent", "workspace: %v", err)
	}
	defer root.Close()
	switch name {
	case "read_file":
		data, err := root.ReadFile(path)
		if err != nil {
			return fail("permanent", "%v", err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		if n := len(lines); n > 0 && lines[n-1] == "" {
			lines = lines[:n-1]
		}
		from := max(num("offset"), 1) - 1
		to := len(lines)
		if l := num("limit"); l > 0 {
			to = min(to, from+l)
		}
		var out string
		if from < len(lines) {
			out = strings.Join(lines[from:to], "")
		}
		return capped(out)
	case "write_file":
		content, ok := str("content")
		if !ok {
			return fail("permanent", "argument content (a string) is required")
		}
		if dir := filepath.Dir(path); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fail("permanent", "%v", err)
			}
		}
		if err := root.WriteFile(path, []byte(content), 0o644); err != nil {
			return fail("permanent", "%v", err)
		}
		return statefmt.ToolResult{Success: true, Output: fmt.Sprintf("wrote %d bytes to %s", len(content), path)}
	}
	return fail("permanent", "no tool %s", name)
}

func capped(out string) statefmt.ToolResult {
	if len(out) > MaxToolOutput {
		return statefmt.ToolResult{Success: true, Output: strings.ToValidUTF8(out[:MaxToolOutput], ""), Truncated: true}
	}
	return statefmt.ToolResult{Success: true, Output: out}
}

// ExitTransient is the exit code by which a command tool says "try again later".
const ExitTransient = 75

// runCommandTool runs a task-defined tool: JSON arguments on stdin, JSON result on stdout, in
// the workspace, in its own process group (killed whole on timeout or cancellation).
func runCommandTool(ctx context.Context, workspace string, tc *task.ToolConfig, args map[string]any) statefmt.ToolResult {
	if tc.Timeout.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tc.Timeout.Duration)
		defer cancel()
	}
	in, _ := json.Marshal(args)
	cmd := exec.CommandContext(ctx, tc.Command[0], tc.Command[1:]...)
	cmd.Dir = workspace
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return statefmt.ToolResult{ErrorKind: "timeout", Error: fmt.Sprintf("timed out after %v", tc.Timeout.Duration)}
	case ctx.Err() != nil:
		return statefmt.ToolResult{ErrorKind: "permanent", Error: "cancelled"}
	case errors.As(err, &ee):
		kind := "permanent"
		if ee.ExitCode() == ExitTransient {
			kind = "transient"
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = ee.Error()
		}
		return statefmt.ToolResult{ErrorKind: kind, Error: msg}
	case err != nil:
		return statefmt.ToolResult{ErrorKind: "permanent", Error: err.Error()}
	}
	res := capped(stdout.String())
	if out := bytes.TrimSpace(stdout.Bytes()); len(out) > 0 && len(out) <= MaxToolOutput {
		if v, err := statefmt.CanonicalJSON(out); err == nil {
			res.Data = v
		}
	}
	return res
}
