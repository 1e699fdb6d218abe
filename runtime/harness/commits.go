package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/gitrepo"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// Commits per step (workspace: {commit: step}). The workspace is a git work tree (made one at
// the harness's first start when it is in none). The runtime commits it:
//
//   - when the harness first starts: the workspace as it found it (the base);
//   - after each completed step, before the checkpoint that records the step as completed.
//
// Each commit carries the trailers Harness-Id, Step-Id (none for the base) and Checkpoint (the
// number of the checkpoint that records it), and its hash is recorded in the state, in a record
// of the tool-call history named CommitRecord (the history is append-only, and that keeps the
// state's formats as they are). The newest such record is the checkpoint's commit.
//
// When a harness resumes after a crash, its workspace is brought back to that commit: what the
// step in flight had changed (and a commit it may have made just before the crash, not yet
// recorded) is kept on a side ref, refs/harness-edge/ID/inflight-N, then the work tree is reset
// to the commit and untracked files are removed (ignored ones stay).

// CommitRecord names the history records of the runtime's commits.
const CommitRecord = "harness-edge:commit"

// commitTimeout bounds each git command of a step commit or a restore.
const commitTimeout = 2 * time.Minute

// commitsSteps reports whether the runtime commits this harness's workspace (sub-agents work
// in their parent's, and the parent commits, unless they have a worktree of their own). h.mu
// held.
func (h *Harness) commitsStepsLocked() bool {
	w := h.task.Workspace
	return w.CommitsSteps() && (h.st.ParentHarnessID == "" || w.Isolated())
}

// checkCommitWorkspace refuses a workspace that commits per step cannot use, before anything
// changes: git missing, or a workspace with no repository of its own inside another
// repository's work tree (it would be made a repository nested in someone else's).
func checkCommitWorkspace(ws string) error {
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("workspace %s: commit: step needs git on PATH: %w", ws, err)
	}
	abs, err := filepath.Abs(ws)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(abs, ".git")); err == nil {
		return nil // a repository of its own (nested in another one or not)
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return fmt.Errorf("workspace %s is inside the git work tree of %s: with commit: step the workspace must be a repository's top directory (or in none: it is then made one)", ws, dir)
		}
		if filepath.Dir(dir) == dir {
			return nil
		}
	}
}

// lastCommit is the commit the state records last ("" when none).
func lastCommit(st *statefmt.HarnessState) string {
	for i := len(st.ToolCallHistory) - 1; i >= 0; i-- {
		if r := st.ToolCallHistory[i]; r.CallName == CommitRecord {
			var c struct{ Commit string }
			if err := json.Unmarshal(r.Result.Data, &c); err == nil && c.Commit != "" {
				return c.Commit
			}
		}
	}
	return ""
}

// gitContext is a context for the runtime's git commands.
func (h *Harness) gitContext() (context.Context, context.CancelFunc) {
	return clock.WithTimeout(context.Background(), h.m.clock, commitTimeout)
}

// openRepoLocked opens (or, in a directory in no work tree, makes) the workspace's repository.
// h.mu held.
func (h *Harness) openRepoLocked(ctx context.Context) (*gitrepo.Repo, error) {
	if h.repo != nil {
		return h.repo, nil
	}
	ws := h.task.Workspace.Path
	repo, err := gitrepo.Open(ctx, ws, nil)
	if errors.Is(err, gitrepo.ErrNotRepo) {
		info, statErr := os.Lstat(filepath.Join(ws, ".git"))
		// No repository: make one. A .git directory git does not take for one, before any
		// commit is recorded, is this harness's own git init cut short by a crash: git init
		// again completes it (it keeps what is there).
		if errors.Is(statErr, fs.ErrNotExist) || statErr == nil && info.IsDir() && lastCommit(h.st) == "" {
			repo, err = gitrepo.Init(ctx, ws, nil)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	h.repo = repo
	return repo, nil
}

// commitMessage is the message of a runtime commit; step "" is the base.
func (h *Harness) commitMessage(step string, checkpoint int) string {
	var b strings.Builder
	if step == "" {
		fmt.Fprintf(&b, "harness %s: the workspace as it started\n\n", h.ID())
	} else {
		desc := ""
		if i := h.plan().step(step); i >= 0 {
			desc, _, _ = strings.Cut(h.st.Plan.Steps[i].Description, "\n")
		}
		fmt.Fprintf(&b, "harness %s: step %s completed\n\n", h.ID(), step)
		if desc != "" {
			fmt.Fprintf(&b, "%s\n\n", desc)
		}
	}
	fmt.Fprintf(&b, "Harness-Id: %s\n", h.ID())
	if step != "" {
		fmt.Fprintf(&b, "Step-Id: %s\n", step)
	}
	fmt.Fprintf(&b, "Checkpoint: %d\n", checkpoint)
	return b.String()
}

// commitWorkspaceLocked commits the whole work tree (even when nothing changed: every step has its
// commit) and records the commit in the history, for the next checkpoint. h.mu held.
func (h *Harness) commitWorkspaceLocked(step string) (string, error) {
	ctx, cancel := h.gitContext()
	defer cancel()
	repo, err := h.openRepoLocked(ctx)
	if err != nil {
		return "", err
	}
	start := h.now()
	checkpoint := h.st.CheckpointCount + 1 // the checkpoint that will record it
	hash, err := repo.CommitAll(ctx, h.commitMessage(step, checkpoint), true)
	if err != nil {
		return "", fmt.Errorf("committing the workspace: %w", err)
	}
	h.recordCommitLocked(step, checkpoint, hash, start)
	return hash, nil
}

func (h *Harness) recordCommitLocked(step string, checkpoint int, hash string, start time.Time) {
	args, _ := statefmt.JSONOf(map[string]any{"step": step, "checkpoint": checkpoint})
	data, _ := statefmt.JSONOf(map[string]any{"commit": hash})
	h.st.ToolCallHistory = append(h.st.ToolCallHistory, statefmt.ToolCallRecord{CallName: CommitRecord, Arguments: args,
		Result: statefmt.ToolResult{Success: true, Output: "committed " + hash, Data: data}, Duration: statefmt.Span(h.now().Sub(start)), Timestamp: statefmt.Instant(start)})
}

// commitStepLocked commits the workspace for a completed step. h.mu held.
func (h *Harness) commitStepLocked(step string) (string, error) {
	if !h.commitsStepsLocked() {
		return "", nil
	}
	return h.commitWorkspaceLocked(step)
}

// syncWorkspaceLocked is the start of a run with commits per step: the first start commits the
// base; a resume after a crash brings the workspace back to the last checkpoint's commit
// (unless the step in flight goes on from a loop snapshot, which was taken with the files as
// they are). h.mu held.
func (h *Harness) syncWorkspaceLocked(interrupted bool) error {
	if !h.commitsStepsLocked() {
		return nil
	}
	ctx, cancel := h.gitContext()
	defer cancel()
	repo, err := h.openRepoLocked(ctx)
	if err != nil {
		return err
	}
	if interrupted {
		clearStaleGitLocks(repo.Dir)
	}
	last := lastCommit(h.st)
	if last == "" {
		// No commit recorded: the first start, or a crash before its base was recorded (then
		// the base, and maybe a step's commit, are on the branch already).
		base, err := h.findBase(ctx, repo)
		if err != nil {
			return err
		}
		if base == "" {
			_, err := h.commitWorkspaceLocked("")
			return err
		}
		h.recordCommitLocked("", h.st.CheckpointCount+1, base, h.now())
		last = base
	}
	if interrupted {
		if h.st.AgentLoopSnapshot != nil {
			return nil
		}
		// The crash freed the workspace lock: another harness may have taken the workspace
		// over and committed on top since. Its commits are its work, and stay on the branch:
		// only the work tree's changes are set aside, and the step runs again on top of them.
		other, head, err := h.takenOverLocked(ctx, repo, last)
		if err != nil {
			return err
		}
		if other != "" {
			h.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("since this harness was interrupted, harness %s committed on top of it in the workspace: the branch stays at %s, and the step in flight runs again on top of it", other, short(head))})
			return h.restoreLocked(ctx, repo, head, "harness "+other+"'s", "the step in flight when it was interrupted")
		}
		return h.restoreLocked(ctx, repo, last, "the last checkpoint's", "the step in flight when it was interrupted")
	}
	// Not interrupted: the state may have gone back (rollback) while the files stayed ahead.
	// HEAD holding later commits of this harness means they did: bring the files back with
	// the state. A commit someone else made on top is theirs, and left alone.
	ahead, err := h.aheadOfLocked(ctx, repo, last)
	if err != nil || !ahead {
		return err
	}
	return h.restoreLocked(ctx, repo, last, "the last checkpoint's", "the work after the checkpoint it was rolled back to")
}

// takenOverLocked names another harness whose commit is on the branch after last (last is an
// ancestor of HEAD), with HEAD; "" when there is none. This harness's sub-agents (ids under
// its own) are not another: their commits reach the branch within a step of this harness, the
// step in flight, and go back with it. h.mu held.
func (h *Harness) takenOverLocked(ctx context.Context, repo *gitrepo.Repo, last string) (string, string, error) {
	head, err := repo.Head(ctx)
	if err != nil || head == "" || head == last {
		return "", "", err
	}
	if err := repo.Run(ctx, nil, "merge-base", "--is-ancestor", last, head); err != nil {
		return "", "", nil // not an ancestor (or unknown): brought back as before
	}
	out, err := repo.Output(ctx, "log", "--format=%(trailers:key=Harness-Id,valueonly,separator=%x2C)", last+".."+head)
	if err != nil {
		return "", "", err
	}
	for _, id := range strings.FieldsFunc(out, func(r rune) bool { return r == ',' || r == '\n' || r == ' ' }) {
		if id != h.ID() && !strings.HasPrefix(id, h.ID()+".") {
			return id, head, nil
		}
	}
	return "", "", nil
}

// aheadOfLocked says whether HEAD is a later commit of this harness than last (last is its
// ancestor, and HEAD carries this harness's id). h.mu held.
func (h *Harness) aheadOfLocked(ctx context.Context, repo *gitrepo.Repo, last string) (bool, error) {
	head, err := repo.Head(ctx)
	if err != nil || head == "" || head == last {
		return false, err
	}
	if err := repo.Run(ctx, nil, "merge-base", "--is-ancestor", last, head); err != nil {
		return false, nil // not an ancestor (or unknown): not ours to move
	}
	out, err := repo.Output(ctx, "log", "-1", "--format=%(trailers:key=Harness-Id,valueonly)", head)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) == h.ID(), nil
}

// findBase finds a base commit of this harness that the state has not recorded: the newest
// commit reachable from HEAD (among the last few) with this harness's id and no step.
func (h *Harness) findBase(ctx context.Context, repo *gitrepo.Repo) (string, error) {
	head, err := repo.Head(ctx)
	if err != nil || head == "" {
		return "", err
	}
	out, err := repo.Output(ctx, "log", "--max-count=50", "--format=%H%x09%(trailers:key=Harness-Id,valueonly,separator=%x2C)%x09%(trailers:key=Step-Id,valueonly,separator=%x2C)", "HEAD")
	if err != nil {
		return "", err
	}
	// Lines end with a tab when the commit has no Step-Id (the base): trim only the newlines.
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 3 && strings.TrimSpace(f[1]) == h.ID() && strings.TrimSpace(f[2]) == "" {
			return f[0], nil
		}
	}
	return "", nil
}

// restoreLocked brings the work tree back to commit (whose says whose it is), keeping what
// differs from it (HEAD if it moved, and the work tree's changes, untracked files included) on a
// side ref. h.mu held.
func (h *Harness) restoreLocked(ctx context.Context, repo *gitrepo.Repo, commit, whose, what string) error {
	head, err := repo.Head(ctx)
	if err != nil {
		return err
	}
	dirty, err := repo.Dirty(ctx)
	if err != nil {
		return err
	}
	if head == commit && !dirty {
		return nil
	}
	// The in-flight state as a commit on top of HEAD, made with a scratch index so that the
	// real one is not touched.
	index := filepath.Join(repo.Dir, ".git", "harness-edge-inflight-index")
	_ = os.Remove(index)
	defer os.Remove(index)
	scratch := *repo
	scratch.Vars = append(slices.Clone(repo.Vars), "GIT_INDEX_FILE="+index)
	tree, err := func() (string, error) {
		if head != "" {
			if err := scratch.Run(ctx, nil, "read-tree", head); err != nil {
				return "", err
			}
		}
		if err := scratch.Run(ctx, nil, "add", "--all"); err != nil {
			return "", err
		}
		out, err := scratch.Output(ctx, "write-tree")
		return strings.TrimSpace(out), err
	}()
	if err != nil {
		return fmt.Errorf("workspace: saving the step in flight: %w", err)
	}
	n, err := h.nextInflight(ctx, repo)
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("refs/harness-edge/%s/inflight-%d", h.ID(), n)
	args := []string{"commit-tree", tree, "-m", fmt.Sprintf("harness %s: %s\n\nHarness-Id: %s\nCheckpoint: %d\n", h.ID(), what, h.ID(), h.st.CheckpointCount)}
	if head != "" {
		args = append(args, "-p", head)
	}
	saved, err := repo.Output(ctx, args...)
	if err != nil {
		return fmt.Errorf("workspace: saving the step in flight: %w", err)
	}
	saved = strings.TrimSpace(saved)
	if err := repo.Run(ctx, nil, "update-ref", ref, saved); err != nil {
		return fmt.Errorf("workspace: saving the step in flight: %w", err)
	}
	if err := repo.Run(ctx, nil, "reset", "--hard", "--quiet", commit); err != nil {
		return fmt.Errorf("workspace: bringing it back to %s: %w", commit, err)
	}
	if err := repo.Run(ctx, nil, "clean", "-d", "--force", "--quiet"); err != nil {
		return fmt.Errorf("workspace: bringing it back to %s: %w", commit, err)
	}
	h.emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("workspace brought back to commit %s (%s); %s is kept at %s (%s)", short(commit), whose, what, ref, short(saved))})
	return nil
}

// nextInflight numbers the next side ref of this harness.
func (h *Harness) nextInflight(ctx context.Context, repo *gitrepo.Repo) (int, error) {
	out, err := repo.Output(ctx, "for-each-ref", "--format=%(refname)", "refs/harness-edge/"+h.ID()+"/")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Fields(out) {
		if i := strings.LastIndex(line, "/inflight-"); i >= 0 {
			if k, err := strconv.Atoi(line[i+len("/inflight-"):]); err == nil && k > n {
				n = k
			}
		}
	}
	return n + 1, nil
}

// clearStaleGitLocks removes the lock files a git command killed with its harness left behind
// (index.lock, HEAD.lock, a branch's lock): the harness holds the workspace, so no git command of
// another harness can be running in it.
func clearStaleGitLocks(dir string) {
	gitDir := filepath.Join(dir, ".git")
	for _, name := range []string{"index.lock", "HEAD.lock", "packed-refs.lock", "config.lock"} {
		_ = os.Remove(filepath.Join(gitDir, name))
	}
	_ = filepath.WalkDir(filepath.Join(gitDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			_ = os.Remove(p)
		}
		return nil
	})
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// commitNote is what a step_completed event says of the step's commit.
func commitNote(commit string) string {
	if commit == "" {
		return ""
	}
	return "workspace committed: " + commit
}
