package gitrepo_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/gitrepo"
)

// A git init killed part-way leaves .git/HEAD.lock and no HEAD; the next Init finishes the
// repository instead of failing on the lock.
func TestInitFinishesAnInitKilledPartWay(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "HEAD.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gitrepo.Init(context.Background(), dir, nil); err != nil {
		t.Fatalf("init after an init killed part-way: %v", err)
	}
	if _, err := gitrepo.Open(context.Background(), dir, nil); err != nil {
		t.Fatalf("the repository does not open: %v", err)
	}
}

// An init killed while it wrote the config (after HEAD, before the object store) leaves
// .git/config.lock, HEAD and no objects/: the next Init finishes the repository too.
func TestInitFinishesAnInitKilledWritingItsConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := gitrepo.Init(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"objects", "config"} {
		if err := os.RemoveAll(filepath.Join(dir, ".git", p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "config.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gitrepo.Init(context.Background(), dir, nil); err != nil {
		t.Fatalf("init after an init killed writing its config: %v", err)
	}
	if _, err := gitrepo.Open(context.Background(), dir, nil); err != nil {
		t.Fatalf("the repository does not open: %v", err)
	}
}

// A lock beside a HEAD belongs to a repository (and maybe a git process at work in it): Init
// leaves it and reports git's refusal.
func TestInitLeavesTheLockOfARepositoryWithAHead(t *testing.T) {
	dir := t.TempDir()
	if _, err := gitrepo.Init(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, ".git", "HEAD.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gitrepo.Init(context.Background(), dir, nil); err == nil {
		t.Log("git init of an existing repository with a held HEAD lock succeeded (this git does not rewrite HEAD)")
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the lock of a repository with a HEAD was removed: %v", err)
	}
}
