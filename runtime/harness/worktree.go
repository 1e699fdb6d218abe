package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/gitrepo"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// Isolation (workspace: {repo: R, isolate: worktree}): each harness works in its own git
// worktree of R, at WorktreeDir(R, id), on the branch BranchPrefix+id, made from the task's ref
// (default: R's HEAD) when the harness first runs. The directory is derived from the harness id
// and never stored: the stored task says only repo and isolate. The branch (and the worktree)
// stay when the harness ends, for review; with merge: fast-forward, R's checked-out branch is
// fast-forwarded to it when the harness completes, when it can be.

// BranchPrefix starts the branch of an isolated harness.
const BranchPrefix = "harness-edge/"

// WorktreeDir is the worktree of harness id of repository repo: beside the repository, in
// .NAME.harness-edge-worktrees.
func WorktreeDir(repo, id string) string {
	repo = filepath.Clean(repo)
	return filepath.Join(filepath.Dir(repo), "."+filepath.Base(repo)+".harness-edge-worktrees", id)
}

// withWorktree is t with an isolated workspace's directory set to the harness's worktree (a
// copy; t itself when not isolated).
func withWorktree(t *task.Task, id string) *task.Task {
	if !t.Workspace.Isolated() {
		return t
	}
	c := *t
	c.Workspace.Path = WorktreeDir(t.Workspace.Repo, id)
	return &c
}

// childWorkspace is the workspace of a sub-agent of harness parent: the parent's directory,
// with its sharing and commit settings but no isolation of its own; or, with subAgents:
// worktree, a worktree of its own on a branch made from the parent's (and so on down).
func childWorkspace(w task.Workspace, parent string) task.Workspace {
	if w.SubAgentWorktrees() {
		return task.Workspace{Repo: w.Repo, Isolate: task.IsolateWorktree, Ref: BranchPrefix + parent, Commit: w.Commit, SubAgents: w.SubAgents}
	}
	return task.Workspace{Path: w.Path, Shared: w.Shared, Commit: w.Commit}
}

// takeChildWorkLocked fast-forwards the harness's worktree to the branch of its completed
// sub-agent cid, with subAgents: worktree: the sub-agent's commits become the parent's, for the
// steps after it. Taking it again (a resume that went back to an earlier commit) is the same
// fast-forward. The parent's branch cannot have moved meanwhile (steps run one at a time, and
// the parent's own commits precede the sub-agent's base), so a failure is a step's failure
// that says why; the branch stays for review. h.mu held.
func (h *Harness) takeChildWorkLocked(cid string) error {
	w := h.task.Workspace
	if !w.SubAgentWorktrees() {
		return nil
	}
	ctx, cancel := h.gitContext()
	defer cancel()
	repo, err := gitrepo.Open(ctx, w.Path, nil)
	if err == nil {
		err = repo.Run(ctx, nil, "merge", "--ff-only", "--quiet", BranchPrefix+cid)
	}
	if err != nil {
		var ge *gitrepo.Error
		msg := err.Error()
		if errors.As(err, &ge) {
			msg = strings.TrimSpace(ge.Stderr)
		}
		return &agent.StepError{Msg: fmt.Sprintf("the work of sub-agent %s (branch %s) could not be fast-forwarded into %s: %s; the branch stays for review", cid, BranchPrefix+cid, w.Path, msg)}
	}
	h.emit(event.Event{Type: event.SubAgent, SubAgentID: cid, Outcome: "merged", Message: fmt.Sprintf("branch %s fast-forwarded into %s", BranchPrefix+cid, w.Path)})
	return nil
}

// ensureWorktreeLocked makes the harness's worktree and branch when they do not exist yet.
// h.mu held.
func (h *Harness) ensureWorktreeLocked() error {
	w := h.task.Workspace
	if !w.Isolated() {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(w.Path, ".git")); err == nil {
		return nil // made by an earlier run
	}
	ctx, cancel := h.gitContext()
	defer cancel()
	repo, err := gitrepo.Open(ctx, w.Repo, nil)
	if err != nil {
		return fmt.Errorf("workspace.repo: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(w.Path), 0o755); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer lockRepo(w.Repo)()
	branch := BranchPrefix + h.ID()
	add := func() error {
		args := []string{"worktree", "add", "--quiet", w.Path, branch}
		if err := repo.Run(ctx, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
			args = []string{"worktree", "add", "--quiet", "-b", branch, w.Path, cmp.Or(w.Ref, "HEAD")}
		}
		return repo.Run(ctx, nil, args...)
	}
	if err := add(); err != nil {
		// A worktree directory removed by hand is still registered, and git refuses to add
		// one there: prune the registrations whose directories are gone, then try again (the
		// branch may have been made meanwhile). Not before every add: a prune deletes the
		// half-made registration of a worktree another process is adding at that moment.
		if !strings.Contains(err.Error(), "already registered") {
			return fmt.Errorf("workspace: the harness's worktree: %w", err)
		}
		_ = repo.Run(ctx, nil, "worktree", "prune")
		if err := add(); err != nil {
			return fmt.Errorf("workspace: the harness's worktree: %w", err)
		}
	}
	h.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("working in worktree %s on branch %s (from %s of %s)", w.Path, branch, cmp.Or(w.Ref, "HEAD"), w.Repo)})
	return nil
}

// mergeWorktreeLocked fast-forwards the repository's checked-out branch to the completed
// harness's branch, with merge: fast-forward. What keeps it from happening (the branches
// diverged, the repository's work tree has changes in the way) is said in a warning: the
// branch stays for review. h.mu held.
func (h *Harness) mergeWorktreeLocked() {
	w := h.task.Workspace
	if !w.Isolated() || w.Merge != task.MergeFastForward || h.st.ParentHarnessID != "" {
		return
	}
	ctx, cancel := h.gitContext()
	defer cancel()
	branch := BranchPrefix + h.ID()
	repo, err := gitrepo.Open(ctx, w.Repo, nil)
	if err == nil {
		err = repo.Run(ctx, nil, "merge", "--ff-only", "--quiet", branch)
	}
	if err != nil {
		var ge *gitrepo.Error
		msg := err.Error()
		if errors.As(err, &ge) {
			msg = strings.TrimSpace(ge.Stderr)
		}
		h.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("branch %s was not merged into %s (%s): it stays for review", branch, w.Repo, msg)})
		return
	}
	h.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("branch %s fast-forwarded into %s", branch, w.Repo)})
}

// RemoveWorktree removes the worktree of harness id when its task isolates it (delete does
// this): the directory and git's record of it go; the branch stays, with the harness's
// commits, for review. It returns the directory removed, "" when there was none.
func (m *Manager) RemoveWorktree(id string) (string, error) {
	// The stored task says where the worktree is: the state is not read, so that a harness
	// whose chain is damaged can still be deleted.
	w, err := m.storedWorkspace(id)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrDamaged) {
		return "", nil // nothing says where a worktree would be: the harness goes, any worktree stays
	}
	if err != nil {
		return "", err
	}
	if !w.Isolated() {
		return "", nil
	}
	dir := WorktreeDir(w.Repo, id)
	if _, err := os.Lstat(dir); err != nil {
		removeLockFile(dir)
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo, err := gitrepo.Open(ctx, w.Repo, nil)
	if err != nil {
		return "", fmt.Errorf("workspace.repo: %w", err)
	}
	unlock := lockRepo(w.Repo)
	err = repo.Run(ctx, nil, "worktree", "remove", "--force", dir)
	unlock()
	if err != nil {
		return "", fmt.Errorf("removing the worktree %s: %w", dir, err)
	}
	removeLockFile(dir)
	return dir, nil
}

// repoLocks serialise this process's changes to a repository's worktrees (lockRepo).
var repoLocks sync.Map // cleaned repository path → *sync.Mutex

// lockRepo locks the worktrees of repo against this process's other changes to them, and
// returns what unlocks them. Harnesses that start at once in a daemon each add a worktree, and a
// deletion removes them meanwhile: git's worktree commands share the repository's bookkeeping
// (.git/worktrees), and an add run beside another's prune or remove lost its registration
// ("could not open .git/worktrees/ID/locked"), which left its harness created and never run.
func lockRepo(repo string) (unlock func()) {
	mu, _ := repoLocks.LoadOrStore(filepath.Clean(repo), new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// removeLockFile removes the workspace lock file of a removed worktree (beside it, in the
// worktrees' directory), which would otherwise stay there, empty, for every harness deleted.
// Nothing holds it: its harness is being deleted, and the worktree was its alone.
func removeLockFile(worktree string) {
	if lock, err := WorkspaceLockFile(worktree); err == nil {
		_ = os.Remove(lock)
	}
}
