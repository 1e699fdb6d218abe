package harness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
)

// newGitRepo makes a repository with one commit.
func newGitRepo(t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	for _, args := range [][]string{{"init", "-q", "-b", "main", repo}, {"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return repo
}

func isolatedTask(id, repo string) string {
	return fmt.Sprintf("id: %s\nagent: A\nautonomy: 5\nworkspace: {repo: %s, isolate: worktree}\n"+
		"agents:\n  A: {driver: script, tools: [write_file], script: {steps: {\"*\": [{tool: write_file, args: {path: %s.txt, content: done}}]}}}\n"+
		"plan: [{id: s, description: s, agent: A}]\n", id, repo, id)
}

// Isolated harnesses that start at once (a daemon's --concurrency) each get their worktree: a
// worktree added beside another's git bookkeeping (a prune before each add) lost its
// registration, and its harness stayed created, never run.
func TestIsolatedHarnessesStartingAtOnceEachGetTheirWorktree(t *testing.T) {
	e := newDiskEnv(t)
	repo := newGitRepo(t)
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		h, err := e.m.Create(parseTask(t, isolatedTask(fmt.Sprintf("w%02d", i), repo)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.Run(context.Background()); err != nil {
				errs[i] = err
			} else if st := h.State(); st.Status != statefmt.StatusCompleted {
				errs[i] = fmt.Errorf("%s: %s", st.Status, st.StatusReason)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		id := fmt.Sprintf("w%02d", i)
		if err != nil {
			t.Errorf("harness %s: %v", id, err)
			continue
		}
		if _, err := os.Stat(filepath.Join(harness.WorktreeDir(repo, id), id+".txt")); err != nil {
			t.Errorf("harness %s's worktree: %v", id, err)
		}
	}
}

// A worktree directory removed by hand before its harness first ran is still registered with
// git, which refuses to add one there: the stale registration is pruned and the add made again.
func TestAWorktreeRemovedByHandIsMadeAgain(t *testing.T) {
	e := newDiskEnv(t)
	repo := newGitRepo(t)
	dir := harness.WorktreeDir(repo, "gone")
	if out, err := exec.Command("git", "-C", repo, "worktree", "add", "--quiet", "-b", "other", dir).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v: %s", err, out)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	h, err := e.m.Create(parseTask(t, isolatedTask("gone", repo)))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
		t.Fatalf("the harness: %v %s: %s", err, h.Status(), h.State().StatusReason)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatalf("its worktree: %v", err)
	}
}
