package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/proc"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// toolEnv is what one tool call runs with.
type toolEnv struct {
	workspace string
	cfg       *task.ToolConfig // never nil (built-ins without settings get the defaults)
	clock     clock.Clock
}

func Failed(kind statefmt.ErrorKind, format string, a ...any) statefmt.ToolResult {
	return statefmt.ToolResult{ErrorKind: kind, Error: fmt.Sprintf(format, a...)}
}

// args reads a call's arguments, collecting what is missing or of the wrong type.
type args struct {
	m   map[string]any
	err error
}

func (a *args) str(key string, required bool) string {
	v, ok := a.m[key]
	if !ok || v == nil {
		if required && a.err == nil {
			a.err = fmt.Errorf("argument %s (a string) is required", key)
		}
		return ""
	}
	s, ok := v.(string)
	if !ok && a.err == nil {
		a.err = fmt.Errorf("argument %s must be a string, not %T", key, v)
	}
	return s
}

func (a *args) num(key string) int {
	switch v := a.m[key].(type) {
	case nil:
		return 0
	case int:
		return v
	case int64:
		return int(v)
	case uint64:
		return int(min(v, 1<<31))
	case float64:
		return int(v)
	default:
		if a.err == nil {
			a.err = fmt.Errorf("argument %s must be a number, not %T", key, v)
		}
		return 0
	}
}

func (a *args) flag(key string) bool {
	switch v := a.m[key].(type) {
	case nil:
		return false
	case bool:
		return v
	default:
		if a.err == nil {
			a.err = fmt.Errorf("argument %s must be true or false, not %T", key, v)
		}
		return false
	}
}

// runBuiltin runs a built-in tool. File tools go through an os.Root on the workspace, which
// refuses absolute paths, ".." and symlinks leading outside it, checked at each step of the open
// itself (so a symlink swapped in after a check cannot redirect it).
func runBuiltin(ctx context.Context, env toolEnv, name string, m map[string]any) statefmt.ToolResult {
	a := &args{m: m}
	if name == "bash" {
		cmd := a.str("command", true)
		timeout := env.cfg.Timeout.Duration
		if timeout == 0 {
			timeout = task.DefaultBashTimeout
		}
		switch v := m["timeout"].(type) { // a call may ask for less than the tool allows
		case nil:
		case string:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return Failed(statefmt.ErrorPermanent, "argument timeout %q is not a duration (like 30s)", v)
			}
			timeout = min(d, timeout)
		default:
			if s := a.num("timeout"); s > 0 {
				timeout = min(time.Duration(s)*time.Second, timeout)
			}
		}
		if a.err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", a.err)
		}
		return runBash(ctx, env, cmd, timeout)
	}
	if err := os.MkdirAll(env.workspace, 0o755); err != nil {
		return Failed(statefmt.ErrorPermanent, "workspace: %v", err)
	}
	if slices.Contains(GitTools, name) {
		return runGit(ctx, env, name, m)
	}
	root, err := os.OpenRoot(env.workspace)
	if err != nil {
		return Failed(statefmt.ErrorPermanent, "workspace: %v", err)
	}
	defer root.Close()
	limit := env.cfg.MaxOutput
	switch name {
	case "read_file":
		p := a.str("path", true)
		offset, n := a.num("offset"), a.num("limit")
		if a.err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", a.err)
		}
		return readLines(ctx, root, p, offset, n, limit)
	case "write_file":
		p, content := a.str("path", true), a.str("content", true)
		if a.err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", a.err)
		}
		if dir := filepath.Dir(p); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return Failed(statefmt.ErrorPermanent, "%v", err)
			}
		}
		if err := writeRegular(root, p, []byte(content), 0o644); err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", err)
		}
		return statefmt.ToolResult{Success: true, Output: fmt.Sprintf("wrote %d bytes to %s", len(content), p)}
	case "edit_file":
		p, old, new, all := a.str("path", true), a.str("old", true), a.str("new", true), a.flag("all")
		if a.err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", a.err)
		}
		if old == "" {
			return Failed(statefmt.ErrorPermanent, "argument old is empty: say which text to replace")
		}
		data, perm, err := readForEdit(ctx, root, p)
		if err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", err)
		}
		n := strings.Count(string(data), old)
		switch {
		case n == 0:
			return Failed(statefmt.ErrorPermanent, "%s does not contain the text to replace", p)
		case n > 1 && !all:
			return Failed(statefmt.ErrorPermanent, "%s contains the text to replace %d times: give more context, or all: true", p, n)
		}
		if !all {
			n = 1
		}
		out := strings.Replace(string(data), old, new, n)
		if err := writeRegular(root, p, []byte(out), perm); err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", err)
		}
		return statefmt.ToolResult{Success: true, Output: fmt.Sprintf("replaced %d occurrence(s) in %s", n, p)}
	case "glob":
		pattern := a.str("pattern", true)
		if a.err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", a.err)
		}
		if err := relativePattern(pattern); err != nil {
			return Failed(statefmt.ErrorPermanent, "pattern %q: %v", pattern, err)
		}
		matches, err := doublestar.Glob(ctxFS{ctx, root.FS()}, pattern, doublestar.WithFilesOnly())
		if ctx.Err() != nil {
			return Failed(statefmt.ErrorPermanent, "cancelled")
		}
		if err != nil {
			return Failed(statefmt.ErrorPermanent, "pattern %q: %v", pattern, err)
		}
		slices.Sort(matches)
		if len(matches) == 0 {
			return statefmt.ToolResult{Success: true}
		}
		return capped(strings.Join(matches, "\n")+"\n", limit)
	case "grep":
		pattern, dir, glob := a.str("pattern", true), a.str("path", false), a.str("glob", false)
		if a.err != nil {
			return Failed(statefmt.ErrorPermanent, "%v", a.err)
		}
		return grep(ctx, root, pattern, dir, glob, limit)
	}
	return Failed(statefmt.ErrorPermanent, "no built-in tool %s", name)
}

// relativePattern refuses glob patterns that name something outside the workspace.
func relativePattern(p string) error {
	if p == "" || path.IsAbs(p) || filepath.IsAbs(p) {
		return errors.New("must be relative to the workspace")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return errors.New("must not contain '..' (it stays inside the workspace)")
		}
	}
	if !doublestar.ValidatePattern(p) {
		return errors.New("is not a valid pattern")
	}
	return nil
}

// grep searches files under dir (default: the whole workspace) for a regular expression,
// optionally only files matching glob; it reports "path:line:text" lines.
func grep(ctx context.Context, root *os.Root, pattern, dir, glob string, limit int) statefmt.ToolResult {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return Failed(statefmt.ErrorPermanent, "pattern: %v", err)
	}
	if dir == "" {
		dir = "."
	}
	dir = path.Clean(filepath.ToSlash(dir))
	if !fs.ValidPath(dir) {
		return Failed(statefmt.ErrorPermanent, "path %q is not inside the workspace (use a relative path without '..')", dir)
	}
	if glob != "" && !doublestar.ValidatePattern(glob) {
		return Failed(statefmt.ErrorPermanent, "glob %q is not a valid pattern", glob)
	}
	fsys := root.FS()
	var out strings.Builder
	truncated := false
	walkErr := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // unreadable entries (and symlinks out of the workspace) are skipped
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if p != dir && d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if glob != "" {
			target := p
			if !strings.Contains(glob, "/") {
				target = d.Name()
			}
			if ok, _ := doublestar.Match(glob, target); !ok {
				return nil
			}
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() || info.Size() > MaxGrepFileSize {
			return nil
		}
		stop, err := grepFile(ctx, root, p, re, &out, limit)
		if err != nil {
			return err
		}
		if stop {
			truncated = true
			return fs.SkipAll
		}
		return nil
	})
	if walkErr != nil {
		if ctx.Err() != nil {
			return Failed(statefmt.ErrorPermanent, "cancelled")
		}
		return Failed(statefmt.ErrorPermanent, "%v", walkErr)
	}
	res := capped(out.String(), limit)
	res.Truncated = res.Truncated || truncated
	return res
}

// capped returns out as a successful result, cut to limit bytes (at a UTF-8 boundary) and
// marked truncated when longer.
func capped(out string, limit int) statefmt.ToolResult {
	if limit <= 0 {
		limit = task.DefaultMaxOutput
	}
	if len(out) > limit {
		return statefmt.ToolResult{Success: true, Output: strings.ToValidUTF8(out[:limit], ""), Truncated: true}
	}
	return statefmt.ToolResult{Success: true, Output: out}
}

// ExitTransient is the exit code by which a command tool (or a bash command) says "try again
// later".
const ExitTransient = 75

// exitResult classifies how a subprocess tool ended.
func exitResult(ctx context.Context, err error, timeout time.Duration, stderr string) (statefmt.ToolResult, bool) {
	var ee *exec.ExitError
	switch {
	case clock.TimedOut(ctx):
		return Failed(statefmt.ErrorTimeout, "timed out after %v (its process group was killed)", timeout), false
	case ctx.Err() != nil:
		return Failed(statefmt.ErrorPermanent, "cancelled"), false
	case errors.As(err, &ee):
		kind := statefmt.ErrorPermanent
		if ee.ExitCode() == ExitTransient {
			kind = statefmt.ErrorTransient
		}
		msg := strings.TrimSpace(stderr)
		if msg == "" {
			msg = ee.Error()
		}
		return statefmt.ToolResult{ErrorKind: kind, Error: msg}, false
	case err != nil:
		return Failed(statefmt.ErrorPermanent, "%v", err), false
	}
	return statefmt.ToolResult{}, true
}

// runCommandTool runs a task-defined tool: JSON arguments on stdin, JSON result on stdout, in
// the workspace, with a clean environment, in its own process group.
func runCommandTool(ctx context.Context, env toolEnv, m map[string]any) statefmt.ToolResult {
	ctx, cancel := clock.WithTimeout(ctx, env.clock, env.cfg.Timeout.Duration)
	defer cancel()
	in, err := statefmt.JSONOf(m)
	if err != nil {
		return Failed(statefmt.ErrorPermanent, "arguments: %v", err)
	}
	if err := os.MkdirAll(env.workspace, 0o755); err != nil {
		return Failed(statefmt.ErrorPermanent, "workspace: %v", err)
	}
	cmd := exec.CommandContext(ctx, env.cfg.Command[0], env.cfg.Command[1:]...)
	cmd.Dir, cmd.Env = env.workspace, proc.CleanEnv(env.cfg.Env)
	cmd.Stdin = bytes.NewReader(in)
	stdout, stderr := &proc.CapWriter{Max: env.cfg.MaxOutput}, &proc.CapWriter{Max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = proc.Run(ctx, cmd)
	if res, ok := exitResult(ctx, err, env.cfg.Timeout.Duration, stderr.String()); !ok {
		return res
	}
	res := capturedResult(stdout)
	if out := bytes.TrimSpace([]byte(stdout.String())); len(out) > 0 && !res.Truncated {
		if v, err := statefmt.CanonicalJSON(out); err == nil {
			res.Data = v
		}
	}
	return res
}

// runBash runs a bash command in the workspace: checked against the allow and deny rules, with a
// clean environment, in its own process group, stdout and stderr captured together (capped).
// A non-zero exit is a failed call with the output kept; 75 is transient.
func runBash(ctx context.Context, env toolEnv, command string, timeout time.Duration) statefmt.ToolResult {
	if err := checkBash(command, env.cfg.Allow, env.cfg.Deny); err != nil {
		return Failed(statefmt.ErrorPermission, "%v", err)
	}
	if err := os.MkdirAll(env.workspace, 0o755); err != nil {
		return Failed(statefmt.ErrorPermanent, "workspace: %v", err)
	}
	ctx, cancel := clock.WithTimeout(ctx, env.clock, timeout)
	defer cancel()
	shell, err := exec.LookPath("bash")
	if err != nil {
		shell = "/bin/sh"
	}
	cmd := exec.CommandContext(ctx, shell, "-c", command)
	cmd.Dir, cmd.Env = env.workspace, proc.CleanEnv(env.cfg.Env)
	out := &proc.CapWriter{Max: env.cfg.MaxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	err = proc.Run(ctx, cmd)
	res := capturedResult(out)
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if ctx.Err() != nil || !errors.As(err, &ee) {
			bad, _ := exitResult(ctx, err, timeout, "")
			bad.Output, bad.Truncated = res.Output, res.Truncated
			return bad
		}
		code = ee.ExitCode()
		res.Success, res.ErrorKind, res.Error = false, statefmt.ErrorPermanent, fmt.Sprintf("exit status %d", code)
		if code == ExitTransient {
			res.ErrorKind = statefmt.ErrorTransient
		}
	}
	res.Data, _ = statefmt.JSONOf(map[string]any{"exitCode": code})
	return res
}

// capturedResult is a subprocess's captured output as a successful result.
func capturedResult(w *proc.CapWriter) statefmt.ToolResult {
	return statefmt.ToolResult{Success: true, Output: strings.ToValidUTF8(w.String(), ""), Truncated: w.Truncated()}
}
