// Package gitrepo runs real git (the git on PATH) on a workspace that is the top directory of a
// git work tree, in a clean environment: no global or system configuration, no hooks, no
// pager, no prompts, a fixed identity, and no discovery of a repository above the workspace.
// The git tools of agents and the runtime's commits per step both go through it.
package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/harness-edge/harness-edge/runtime/proc"
)

// Identity is the author and committer of the commits made through this package.
const (
	IdentityName  = "harness-edge"
	IdentityEmail = "harness-edge@localhost"
)

// settings are passed to every git command: they override the repository's own configuration
// where it could run programs or wait for a person (hooks, fsmonitor, pagers, signing).
var settings = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.pager=cat",
	"-c", "commit.gpgsign=false",
	"-c", "tag.gpgsign=false",
	"-c", "gc.auto=0",
	"-c", "advice.detachedHead=false",
	"-c", "init.defaultBranch=main",
}

// Error is a git command that failed: the command, its exit status and what it printed on stderr.
type Error struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrNotRepo is returned by Open for a directory that is not the top of a git work tree.
var ErrNotRepo = errors.New("not the top directory of a git work tree")

// Repo is a git work tree whose top directory is Dir (an absolute path).
type Repo struct {
	Dir string
	// Env names variables of harness-edge's environment git sees, besides those of proc.CleanEnv.
	Env []string
	// Vars are more variables for git, NAME=value (a scratch GIT_INDEX_FILE, say).
	Vars []string
}

// Environ is the environment git runs with in dir.
func Environ(dir string, extra []string) []string {
	env := proc.CleanEnv(extra)
	return append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_LITERAL_PATHSPECS=1", // a path is a path: no ":(top)" or ":/" magic reaching out
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir),
		"GIT_AUTHOR_NAME="+IdentityName, "GIT_AUTHOR_EMAIL="+IdentityEmail,
		"GIT_COMMITTER_NAME="+IdentityName, "GIT_COMMITTER_EMAIL="+IdentityEmail,
	)
}

// Open returns the repository whose work tree's top directory is dir. A directory inside a
// work tree (not its top), or in none, is refused with ErrNotRepo: git would act on files
// outside it.
func Open(ctx context.Context, dir string, extra []string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r := &Repo{Dir: abs, Env: extra}
	top, err := r.Output(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "not a git repository") {
			return nil, fmt.Errorf("%s: %w (run git init there, or make the workspace the repository's top directory)", abs, ErrNotRepo)
		}
		return nil, err
	}
	want, err1 := filepath.EvalSymlinks(abs)
	got, err2 := filepath.EvalSymlinks(strings.TrimSpace(top))
	if err1 != nil || err2 != nil || want != got {
		return nil, fmt.Errorf("%s: %w (its work tree starts at %s)", abs, ErrNotRepo, strings.TrimSpace(top))
	}
	return r, nil
}

// Init makes dir a new git repository (a branch main, no commit yet) and returns it.
func Init(ctx context.Context, dir string, extra []string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	r := &Repo{Dir: abs, Env: extra}
	err = r.Run(ctx, nil, "init", "--quiet")
	if err != nil && clearUnfinishedInit(abs) {
		err = r.Run(ctx, nil, "init", "--quiet")
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// clearUnfinishedInit removes the locks a `git init` killed part-way left behind in .git, and
// reports whether there were any. git init writes HEAD, then the config (under config.lock),
// and makes the object store last: a .git without HEAD or without objects/ is an init cut short,
// not a repository, and every later init refuses the lock it left (HEAD.lock or config.lock).
// A repository that has both keeps its locks (a git process may be at work in it). (Init is only
// called for a workspace that is not a repository, by the harness that holds it.)
func clearUnfinishedInit(dir string) bool {
	gitDir := filepath.Join(dir, ".git")
	_, noHead := os.Lstat(filepath.Join(gitDir, "HEAD"))
	_, noObjects := os.Lstat(filepath.Join(gitDir, "objects"))
	if !errors.Is(noHead, os.ErrNotExist) && !errors.Is(noObjects, os.ErrNotExist) {
		return false
	}
	cleared := false
	for _, name := range []string{"HEAD.lock", "config.lock"} {
		cleared = os.Remove(filepath.Join(gitDir, name)) == nil || cleared
	}
	return cleared
}

// Command is a git command in the repository, in the clean environment, not started.
func (r *Repo) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", append(append([]string{"--no-pager"}, settings...), args...)...)
	cmd.Dir, cmd.Env = r.Dir, append(Environ(r.Dir, r.Env), r.Vars...)
	return cmd
}

// Run runs a git command (in its own process group, killed whole when ctx ends) with stdout
// going to out (nil: discarded). A failure is an *Error with git's stderr.
func (r *Repo) Run(ctx context.Context, out io.Writer, args ...string) error {
	cmd := r.Command(ctx, args...)
	if out == nil {
		out = io.Discard
	}
	var stderr proc.CapWriter
	stderr.Max = 8 << 10
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := proc.Run(ctx, cmd); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Args: args, Err: err, Stderr: stderr.String()}
	}
	return nil
}

// Output runs a git command and returns its stdout (at most 1 MiB of it).
func (r *Repo) Output(ctx context.Context, args ...string) (string, error) {
	out := &proc.CapWriter{Max: 1 << 20}
	err := r.Run(ctx, out, args...)
	return out.String(), err
}

// Head is the commit HEAD names ("" when the branch has no commit yet).
func (r *Repo) Head(ctx context.Context) (string, error) {
	out, err := r.Output(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	var ge *Error
	if errors.As(err, &ge) && strings.TrimSpace(ge.Stderr) == "" {
		return "", nil // no commit yet
	}
	return strings.TrimSpace(out), err
}

// Dirty reports whether the work tree or the index differs from HEAD (untracked files count;
// ignored ones do not).
func (r *Repo) Dirty(ctx context.Context) (bool, error) {
	out, err := r.Output(ctx, "status", "--porcelain", "--untracked-files=all")
	return strings.TrimSpace(out) != "", err
}

// CommitAll stages every change of the work tree (new, changed and removed files) and commits
// it with message; allowEmpty commits even when nothing changed. It returns the new commit.
func (r *Repo) CommitAll(ctx context.Context, message string, allowEmpty bool) (string, error) {
	if err := r.Run(ctx, nil, "add", "--all"); err != nil {
		return "", err
	}
	args := []string{"commit", "--quiet", "--no-verify", "--file=-"}
	if allowEmpty {
		args = append(args, "--allow-empty")
	}
	cmd := r.Command(ctx, args...)
	cmd.Stdin = bytes.NewReader([]byte(message))
	var stderr, stdout proc.CapWriter
	stderr.Max, stdout.Max = 8<<10, 8<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := proc.Run(ctx, cmd); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg := stderr.String()
		if strings.TrimSpace(msg) == "" {
			msg = stdout.String() // "nothing to commit" goes to stdout
		}
		return "", &Error{Args: args, Err: err, Stderr: msg}
	}
	return r.Head(ctx)
}
