package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// gatedFS is the real disk with one gate: once armed, the next table file created (a flush's or
// a compaction's) waits until the test opens the gate.
type gatedFS struct {
	vfs.FS
	armed        atomic.Bool
	hit, release chan struct{}
}

func (f *gatedFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") && f.armed.CompareAndSwap(true, false) {
		close(f.hit)
		<-f.release
	}
	return f.FS.Create(name, cat)
}

// deletion is what a Delete or a Prune run in the background returned.
type deletion struct {
	res DeleteResult
	err error
}

// answersMeanwhile fails the test unless the server answers a request (health) within 5 s while
// what holds the deletion holds it; release lets the deletion go on should it not.
func answersMeanwhile(t *testing.T, srv *Server, while string, release func()) {
	t.Helper()
	answered := make(chan error, 1)
	go func() {
		_, err := srv.Health(context.Background())
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		release()
		t.Fatalf("the server did not answer while %s", while)
	}
}

// A deletion gives the disk back by compacting once it has let go of the server: compacting a
// large store takes seconds, and every other request (a command's first call, ls, the console)
// waited for it. Here the compaction is held at its first table while the server answers.
func TestADeletionsCompactionHoldsUpNothingElse(t *testing.T) {
	fs := &gatedFS{FS: vfs.Default, hit: make(chan struct{}), release: make(chan struct{})}
	db, err := store.OpenStore(filepath.Join(t.TempDir(), "store"), store.StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := NewServer(db, Config{Owner: "daemon"})
	for _, id := range []string{"a", "b"} {
		tk, err := task.Parse("t.yaml", []byte("id: "+id+"\nagent: A\nautonomy: 5\nworkspace: "+t.TempDir()+
			"\nagents:\n  A: {driver: script, script: {steps: {\"*\": [{output: done}]}}}\nplan: [{id: s, description: s, agent: A}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		h, err := srv.Manager().Create(tk)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
			t.Fatalf("harness %s: %v %s", id, err, h.Status())
		}
	}
	fs.armed.Store(true)
	done := make(chan deletion, 1)
	go func() {
		res, err := srv.Delete(context.Background(), "a", false)
		done <- deletion{res, err}
	}()
	select {
	case <-fs.hit:
	case r := <-done:
		close(fs.release)
		t.Fatalf("the deletion wrote no table: %+v %v", r.res, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the deletion's compaction did not start")
	}
	answersMeanwhile(t, srv, "a deletion compacted", func() { close(fs.release) })
	if _, err := db.Index("a"); err == nil {
		t.Fatal("harness a is still listed while its keys are compacted")
	}
	close(fs.release)
	r := <-done
	if r.err != nil || len(r.res.Harnesses) != 1 || r.res.Harnesses[0].ID != "a" || r.res.BytesAfter == 0 {
		t.Fatalf("the deletion: %+v %v", r.res, r.err)
	}
	if _, err := db.Index("b"); err != nil {
		t.Fatalf("harness b: %v", err)
	}
}

// heldGit puts a git first on PATH that, asked to remove a worktree, says so (hit is made) and
// waits for release to exist before running the real git.
func heldGit(t *testing.T) (hit, release string) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hit, release = filepath.Join(dir, "hit"), filepath.Join(dir, "release")
	script := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do
	if [ "$a" = remove ]; then
		: > %q
		while [ ! -e %q ]; do sleep 0.01; done
	fi
done
exec %q "$@"
`, hit, release, real)
	if err := os.WriteFile(filepath.Join(dir, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) }) // a test that failed holding it
	return hit, release
}

// A prune removes the worktrees of isolated harnesses (a `git worktree remove` each, tens of
// milliseconds: seconds for hundreds) without holding the server: every other request is
// answered meanwhile, and the harnesses being deleted are reserved, so that a request about
// one (a retry, a delete, another prune) is refused or skips it, as if it were gone already.
func TestAPruneRemovesWorktreesWithoutHoldingUpTheServer(t *testing.T) {
	srv, db, repo := isolatedStore(t, "a")
	wt := harness.WorktreeDir(repo, "a")
	hit, release := heldGit(t)
	done := make(chan deletion, 1)
	go func() {
		res, err := srv.Prune(context.Background(), PruneRequest{OlderThan: "0s"})
		done <- deletion{res, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(hit); err == nil {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the prune removed no worktree: %+v %v", r.res, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the prune did not start removing the worktree")
		}
	}
	answersMeanwhile(t, srv, "a prune removed a worktree", func() { _ = os.WriteFile(release, nil, 0o644) })
	if _, err := srv.Retry(context.Background(), "a", RetryRequest{}); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("a retry of the harness being deleted: %v", err)
	}
	if _, err := srv.Delete(context.Background(), "a", true); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("a delete of the harness being deleted: %v", err)
	}
	if res, err := srv.Prune(context.Background(), PruneRequest{OlderThan: "0s"}); err != nil || len(res.Harnesses) != 0 || len(res.Skipped) != 1 || res.Skipped[0].ID != "a" {
		t.Errorf("a second prune meanwhile: %+v %v", res, err)
	}
	if e, err := db.Index("a"); err != nil || e.Status != statefmt.StatusFailed {
		t.Fatalf("harness a while its worktree is removed: %+v %v", e, err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.res.Harnesses) != 1 || r.res.Harnesses[0].ID != "a" || r.res.Harnesses[0].Worktree != wt {
		t.Fatalf("the prune: %+v %v", r.res, r.err)
	}
	if _, err := db.Index("a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("harness a after the prune: %v", err)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("the worktree of harness a after the prune: %v", err)
	}
	if entries, err := os.ReadDir(filepath.Dir(wt)); err != nil || len(entries) != 0 {
		t.Fatalf("the worktrees' directory after the prune holds %v (%v): want nothing, its lock file neither", entries, err)
	}
	if srv.Manager().Reserved("a") {
		t.Fatal("harness a is still reserved after its deletion")
	}
}

// isolatedStore is a server over a new store with a failed harness for each id, each in a worktree
// of its own of one repository (a retry would take them back: the file they read is not there).
func isolatedStore(t *testing.T, ids ...string) (*Server, *store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	for _, args := range [][]string{{"init", "-q", "-b", "main", repo}, {"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	db, err := store.OpenStore(filepath.Join(dir, "store"), store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := NewServer(db, Config{Owner: "daemon"})
	for _, id := range ids {
		tk, err := task.Parse(id+".yaml", []byte("id: "+id+"\nagent: A\nautonomy: 5\nworkspace: {repo: "+repo+", isolate: worktree}\n"+
			"agents:\n  A: {driver: script, tools: [read_file], script: {steps: {\"*\": [{tool: read_file, args: {path: missing.txt}}]}}}\n"+
			"plan: [{id: s, description: s, agent: A}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		h, err := srv.Manager().Create(tk)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusFailed {
			t.Fatalf("harness %s: %v %s", id, err, h.Status())
		}
		if _, err := os.Stat(harness.WorktreeDir(repo, id)); err != nil {
			t.Fatalf("harness %s has no worktree: %v", id, err)
		}
	}
	return srv, db, repo
}

// A worktree that cannot be removed (git refuses a locked one) keeps its harness, which a prune
// lists as skipped with git's reason; the others are deleted. A retention prune of a daemon
// is not stopped for good by one locked worktree.
func TestAPruneSkipsAHarnessWhoseWorktreeCannotBeRemoved(t *testing.T) {
	srv, db, repo := isolatedStore(t, "a", "b", "c")
	locked := harness.WorktreeDir(repo, "b")
	if out, err := exec.Command("git", "-C", repo, "worktree", "lock", locked).CombinedOutput(); err != nil {
		t.Fatalf("git worktree lock: %v: %s", err, out)
	}
	res, err := srv.Prune(context.Background(), PruneRequest{OlderThan: "0s"})
	if err != nil || len(res.Harnesses) != 2 || res.Harnesses[0].ID != "a" || res.Harnesses[1].ID != "c" ||
		len(res.Skipped) != 1 || res.Skipped[0].ID != "b" || !strings.Contains(res.Skipped[0].Why, "locked") {
		t.Fatalf("the prune: %+v %v", res, err)
	}
	for _, id := range []string{"a", "c"} {
		if _, err := db.Index(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("harness %s after the prune: %v", id, err)
		}
		if _, err := os.Stat(harness.WorktreeDir(repo, id)); !os.IsNotExist(err) {
			t.Errorf("the worktree of harness %s after the prune: %v", id, err)
		}
	}
	if e, err := db.Index("b"); err != nil || e.Status != statefmt.StatusFailed {
		t.Fatalf("harness b: %+v %v", e, err)
	}
	if _, err := os.Stat(locked); err != nil {
		t.Fatalf("the locked worktree: %v", err)
	}
	// A delete of it is refused whole, the store unchanged, as before.
	if _, err := srv.Delete(context.Background(), "b", false); err == nil || !strings.Contains(err.Error(), "the store was not changed") {
		t.Fatalf("a delete of harness b: %v", err)
	}
	if _, err := db.Index("b"); err != nil {
		t.Fatalf("harness b after the refused delete: %v", err)
	}
}
