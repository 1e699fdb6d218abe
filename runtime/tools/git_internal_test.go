package tools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/gitrepo"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// gitSandbox is the sandbox (a workspace with links out of it and a secret beside it) made a git
// repository with one commit.
func gitSandbox(t *testing.T) *sandbox {
	t.Helper()
	s := newSandbox(t)
	for _, l := range []string{"link-file", "link-dir", "rel-link-dir"} {
		if err := os.Remove(filepath.Join(s.ws, l)); err != nil { // committed below, they would be committed links
			t.Fatal(err)
		}
	}
	repo, err := gitrepo.Init(context.Background(), s.ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CommitAll(context.Background(), "initial\n", false); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{filepath.Join(s.outside, "secret.txt"), "link-file"}, {s.outside, "link-dir"}} {
		if err := os.Symlink(l[0], filepath.Join(s.ws, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.ws, ".git", "info", "exclude"), []byte("link-file\nlink-dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// gitOut runs git in dir (with the test's own environment: a second opinion on what the tools did).
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// The git tools run real git on the workspace: status, diff, log, and a commit whose hash comes
// back in data.commit; a commit with nothing to commit fails and changes nothing.
func TestGitToolsRunRealGit(t *testing.T) {
	s := gitSandbox(t)
	head0 := gitOut(t, s.ws, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(s.ws, "notes.md"), []byte("alpha\nBETA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.ws, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := s.run("git_status", nil); !res.Success || !strings.Contains(res.Output, " M notes.md") || !strings.Contains(res.Output, "?? new.txt") || !strings.Contains(res.Output, "## main") {
		t.Fatalf("git_status: %+v", res)
	}
	if res := s.run("git_diff", map[string]any{"paths": []any{"notes.md"}}); !res.Success || !strings.Contains(res.Output, "-beta") || !strings.Contains(res.Output, "+BETA") {
		t.Fatalf("git_diff: %+v", res)
	}
	res := s.run("git_commit", map[string]any{"message": "Capitalise beta\n\nAnd add a file."})
	head := gitOut(t, s.ws, "rev-parse", "HEAD")
	if !res.Success || string(res.Data) != `{"commit":"`+head+`"}` || head == head0 || !strings.Contains(res.Output, "Capitalise beta") {
		t.Fatalf("git_commit: %+v (HEAD %s)", res, head)
	}
	if files := gitOut(t, s.ws, "show", "--name-only", "--format=", "HEAD"); files != "new.txt\nnotes.md" {
		t.Fatalf("the commit holds %q", files)
	}
	if res := s.run("git_log", map[string]any{"limit": 1}); !res.Success || !strings.HasPrefix(res.Output, head+" ") || !strings.Contains(res.Output, "    Capitalise beta") || strings.Contains(res.Output, "initial") {
		t.Fatalf("git_log: %+v", res)
	}
	if res := s.run("git_diff", map[string]any{"ref": "HEAD~1..HEAD", "paths": "new.txt"}); !res.Success || !strings.Contains(res.Output, "+new") {
		t.Fatalf("git_diff of a range: %+v", res)
	}
	if res := s.run("git_commit", map[string]any{"message": "again"}); res.Success || !strings.Contains(res.Error, "nothing to commit") || gitOut(t, s.ws, "rev-parse", "HEAD") != head {
		t.Fatalf("a commit of nothing: %+v", res)
	}
	if res := s.run("git_commit", map[string]any{"message": "  "}); res.Success || !strings.Contains(res.Error, "message is empty") {
		t.Fatalf("an empty message: %+v", res)
	}
	if cfg := gitSettings("git_commit"); !cfg.SideEffects || cfg.Replay != "ask" {
		t.Fatalf("git_commit is not journaled by default: %+v", cfg)
	}
}

// The git tools refuse paths outside the workspace (.., absolute, through a symlink) and refs that
// could be read as options, without running anything: nothing is staged or committed, and no
// file is written.
func TestGitToolsRefusePathsOutsideTheWorkspace(t *testing.T) {
	s := gitSandbox(t)
	head := gitOut(t, s.ws, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(s.outside, "secret.txt"), []byte("CHANGED\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tool := range GitTools {
		for _, p := range []string{"../outside/secret.txt", filepath.Join(s.outside, "secret.txt"), "link-dir/secret.txt", "link-file", "sub/../../outside"} {
			args := map[string]any{"paths": []any{p}}
			if tool == "git_commit" {
				args["message"] = "steal"
			}
			res := s.run(tool, args)
			if res.Success || res.ErrorKind != statefmt.ErrorPermission || !strings.Contains(res.Error, "workspace") {
				t.Errorf("%s %s: %+v", tool, p, res)
			}
		}
	}
	for _, tool := range []string{"git_diff", "git_log"} {
		for _, ref := range []string{"--output=" + filepath.Join(s.outside, "written"), "-p", "HEAD; rm -rf .", ""} {
			if ref == "" {
				continue
			}
			res := s.run(tool, map[string]any{"ref": ref})
			if res.Success || !strings.Contains(res.Error, "is not a ref") {
				t.Errorf("%s ref %q: %+v", tool, ref, res)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(s.outside, "written")); err == nil {
		t.Fatal("a ref was read as --output")
	}
	if got := gitOut(t, s.ws, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved to %s", got)
	}
	if staged := gitOut(t, s.ws, "diff", "--cached", "--name-only"); staged != "" {
		t.Fatalf("staged: %s", staged)
	}
}

// git runs in a clean environment: the caller's GIT_DIR, global configuration (identity,
// hooks) and any repository above the workspace are not seen.
func TestGitToolsRunInACleanEnvironment(t *testing.T) {
	s := gitSandbox(t)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Someone Else\n\temail = else@example.com\n[commit]\n\tgpgsign = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("GIT_DIR", filepath.Join(s.outside, ".git"))
	hook := filepath.Join(s.ws, ".git", "hooks", "pre-commit")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+filepath.Join(s.outside, "hook-ran")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := s.run("git_commit", map[string]any{"message": "add a"}); !res.Success {
		t.Fatalf("git_commit: %+v", res)
	}
	t.Setenv("GIT_DIR", "")
	os.Unsetenv("GIT_DIR")
	if who := gitOut(t, s.ws, "log", "-1", "--format=%an <%ae>"); who != gitrepo.IdentityName+" <"+gitrepo.IdentityEmail+">" {
		t.Fatalf("committed as %s", who)
	}
	if _, err := os.Stat(filepath.Join(s.outside, "hook-ran")); err == nil {
		t.Fatal("the repository's pre-commit hook ran")
	}
	// A workspace inside another repository (not its top) is refused: git would act above it.
	sub := filepath.Join(s.ws, "sub")
	inner := toolEnv{workspace: sub, cfg: &task.ToolConfig{MaxOutput: task.DefaultMaxOutput}, clock: s.env.clock}
	if res := runBuiltin(context.Background(), inner, "git_status", nil); res.Success || !strings.Contains(res.Error, "not the top directory of a git work tree") {
		t.Fatalf("git_status in a sub-directory of a repository: %+v", res)
	}
	plain := toolEnv{workspace: t.TempDir(), cfg: inner.cfg, clock: s.env.clock}
	if res := runBuiltin(context.Background(), plain, "git_log", nil); res.Success || !strings.Contains(res.Error, "git init") {
		t.Fatalf("git_log outside any repository: %+v", res)
	}
}
