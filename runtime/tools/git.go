package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/gitrepo"
	"github.com/harness-edge/harness-edge/runtime/proc"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// The git tools run real git in the workspace, which must be the top directory of a git work
// tree (git is not allowed to find a repository above it), in a clean environment (see
// runtime/gitrepo). Paths are confined to the workspace as the file tools' are; refs may not
// look like options. git_commit is a side effect: journaled like any tool with sideEffects.

// GitTools are the built-in git tools.
var GitTools = []string{"git_status", "git_diff", "git_log", "git_commit"}

// DefaultGitTimeout is a git tool call's timeout when its settings name none.
const DefaultGitTimeout = time.Minute

// DefaultGitLog is how many commits git_log lists when the call does not say.
const DefaultGitLog = 20

// refPattern is what a ref (or a range of refs) argument may look like: no leading '-', so it
// can never be read as an option.
var refPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./~^@{}:+-]*$`) })

// confinedPaths checks path arguments: relative, inside the workspace, and not through a
// symlink that leads out of it.
func confinedPaths(workspace string, paths []string) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, p := range paths {
		clean := filepath.Clean(p)
		if p == "" || filepath.IsAbs(p) || !filepath.IsLocal(clean) {
			return fmt.Errorf("path %q is not inside the workspace (use a relative path without '..')", p)
		}
		// A path that exists must be reachable without leaving the workspace (os.Root refuses
		// symlinks out of it); one that does not exist (a deleted file) is only a name.
		if _, err := root.Lstat(clean); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("path %q is not inside the workspace: %v", p, err)
		}
		if info, err := os.Lstat(filepath.Join(workspace, clean)); err == nil && info.Mode()&os.ModeSymlink != 0 {
			if _, err := root.Stat(clean); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("path %q leads outside the workspace: %v", p, err)
			}
		}
	}
	return nil
}

// strList reads an argument that is a string or a list of strings.
func (a *args) strList(key string) []string {
	switch v := a.m[key].(type) {
	case nil:
		return nil
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				if a.err == nil {
					a.err = fmt.Errorf("argument %s must be a list of strings, not one holding %T", key, x)
				}
				return nil
			}
			out = append(out, s)
		}
		return out
	default:
		if a.err == nil {
			a.err = fmt.Errorf("argument %s must be a string or a list of strings, not %T", key, v)
		}
		return nil
	}
}

// runGit runs a git tool.
func runGit(ctx context.Context, env toolEnv, name string, m map[string]any) statefmt.ToolResult {
	timeout := env.cfg.Timeout.Duration
	if timeout <= 0 {
		timeout = DefaultGitTimeout
	}
	ctx, cancel := clock.WithTimeout(ctx, env.clock, timeout)
	defer cancel()
	a := &args{m: m}
	var gitArgs []string
	var paths []string
	ref := ""
	switch name {
	case "git_status":
		paths = a.strList("paths")
		gitArgs = []string{"status", "--short", "--branch", "--untracked-files=all"}
	case "git_diff":
		paths, ref = a.strList("paths"), a.str("ref", false)
		gitArgs = []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--stat", "--patch"}
		if a.flag("staged") {
			gitArgs = append(gitArgs, "--cached")
		}
	case "git_log":
		paths, ref = a.strList("paths"), a.str("ref", false)
		n := a.num("limit")
		if n <= 0 {
			n = DefaultGitLog
		}
		gitArgs = []string{"log", "--no-color", "--no-ext-diff", "--no-textconv", fmt.Sprintf("--max-count=%d", min(n, 1000)),
			"--date=iso-strict", "--format=%H %ad %an%n    %s"}
	case "git_commit":
		return gitCommit(ctx, env, a, timeout)
	default:
		return Failed(statefmt.ErrorPermanent, "no built-in tool %s", name)
	}
	if a.err != nil {
		return Failed(statefmt.ErrorPermanent, "%v", a.err)
	}
	if ref != "" {
		if !refPattern().MatchString(ref) {
			return Failed(statefmt.ErrorPermanent, "ref %q is not a ref or a range of refs (letters, digits and ./~^@{}:+-, not starting with '-')", ref)
		}
		gitArgs = append(gitArgs, ref)
	}
	repo, res := openRepo(ctx, env)
	if repo == nil {
		return res
	}
	if err := confinedPaths(repo.Dir, paths); err != nil {
		return Failed(statefmt.ErrorPermission, "%v", err)
	}
	gitArgs = append(append(gitArgs, "--"), paths...)
	out := &proc.CapWriter{Max: env.cfg.MaxOutput}
	if err := repo.Run(ctx, out, gitArgs...); err != nil {
		return gitFailure(ctx, err, timeout)
	}
	return capturedResult(out)
}

// openRepo opens the workspace's repository, or says why it is none.
func openRepo(ctx context.Context, env toolEnv) (*gitrepo.Repo, statefmt.ToolResult) {
	repo, err := gitrepo.Open(ctx, env.workspace, env.cfg.Env)
	if err != nil {
		if errors.Is(err, gitrepo.ErrNotRepo) {
			return nil, Failed(statefmt.ErrorPermanent, "the workspace %v", err)
		}
		return nil, gitFailure(ctx, err, 0)
	}
	return repo, statefmt.ToolResult{}
}

// gitFailure classifies a git command's failure.
func gitFailure(ctx context.Context, err error, timeout time.Duration) statefmt.ToolResult {
	switch {
	case clock.TimedOut(ctx):
		return Failed(statefmt.ErrorTimeout, "timed out after %v (git was killed)", timeout)
	case ctx.Err() != nil:
		return Failed(statefmt.ErrorPermanent, "cancelled")
	}
	return Failed(statefmt.ErrorPermanent, "%v", err)
}

// gitCommit commits the workspace's changes (all of them, or the paths the call names) with
// the call's message.
func gitCommit(ctx context.Context, env toolEnv, a *args, timeout time.Duration) statefmt.ToolResult {
	message, paths := a.str("message", true), a.strList("paths")
	if a.err != nil {
		return Failed(statefmt.ErrorPermanent, "%v", a.err)
	}
	if strings.TrimSpace(message) == "" {
		return Failed(statefmt.ErrorPermanent, "argument message is empty: say what the commit does")
	}
	repo, res := openRepo(ctx, env)
	if repo == nil {
		return res
	}
	if err := confinedPaths(repo.Dir, paths); err != nil {
		return Failed(statefmt.ErrorPermission, "%v", err)
	}
	add := []string{"add", "--all", "--"}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	if err := repo.Run(ctx, nil, append(add, paths...)...); err != nil {
		return gitFailure(ctx, err, timeout)
	}
	commit := []string{"commit", "--quiet", "--no-verify", "-m", message}
	if len(slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return p == "." })) > 0 {
		commit = append(append(commit, "--"), paths...)
	}
	if dirty, err := staged(ctx, repo, paths); err != nil {
		return gitFailure(ctx, err, timeout)
	} else if !dirty {
		return Failed(statefmt.ErrorPermanent, "nothing to commit: the workspace has no changes%s", pathNote(paths))
	}
	if err := repo.Run(ctx, nil, commit...); err != nil {
		return gitFailure(ctx, err, timeout)
	}
	head, err := repo.Head(ctx)
	if err != nil {
		return gitFailure(ctx, err, timeout)
	}
	summary, _ := repo.Output(ctx, "show", "--stat", "--no-color", "--format=%H%n%s", "HEAD")
	res = capped(summary, env.cfg.MaxOutput)
	res.Data, _ = statefmt.JSONOf(map[string]any{"commit": head})
	return res
}

// staged reports whether the index holds changes to commit (under paths).
func staged(ctx context.Context, repo *gitrepo.Repo, paths []string) (bool, error) {
	head, err := repo.Head(ctx)
	if err != nil {
		return false, err
	}
	if head == "" { // the first commit: anything in the index
		out, err := repo.Output(ctx, append([]string{"ls-files", "--cached", "--"}, paths...)...)
		return strings.TrimSpace(out) != "", err
	}
	out, err := repo.Output(ctx, append([]string{"diff", "--cached", "--name-only", "--no-ext-diff", "--"}, paths...)...)
	return strings.TrimSpace(out) != "", err
}

func pathNote(paths []string) string {
	if len(paths) == 1 && paths[0] == "." {
		return ""
	}
	return " under " + strings.Join(paths, ", ")
}

// gitSettings are a git tool's settings when the task has none for it: git_commit is a side
// effect (journaled; a call interrupted after its intent asks a human by default).
func gitSettings(name string) *task.ToolConfig {
	tc := &task.ToolConfig{MaxOutput: task.DefaultMaxOutput}
	if name == "git_commit" {
		tc.SideEffects, tc.Replay = true, "ask"
	}
	return tc
}
