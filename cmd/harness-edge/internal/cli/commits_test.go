package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// commitTask: steps s0..s(n-1) in a chain, each writing its own file and appending its name to
// a shared one (a step whose effects were left behind by a crash and then ran again would
// append it twice), with commits per step. A step's sleep gives a kill time to land in it.
func commitTask(id, ws string, n int, sleep string) string {
	var plan, steps strings.Builder
	for i := range n {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("s%d", i-1)
		}
		fmt.Fprintf(&plan, "        - {id: s%d, description: step %d, agent: A, dependsOn: [%s]}\n", i, i, dep)
		fmt.Fprintf(&steps, "        s%d:\n          - {tool: write_file, args: {path: s%d.txt, content: \"step %d\"}}\n", i, i, i)
		fmt.Fprintf(&steps, "          - {tool: bash, args: {command: \"echo s%d >> journal.txt\"}}\n", i)
		fmt.Fprintf(&steps, "          - {sleep: %s}\n          - {output: \"s%d done\"}\n", sleep, i)
	}
	return fmt.Sprintf("id: %s\nagent: A\nautonomy: 5\nbudget: {toolCalls: 1000}\nworkspace: {path: %s, commit: step}\nagents:\n  A:\n    driver: script\n    tools: [write_file, bash]\n    script:\n      plan:\n%s      steps:\n%s",
		id, ws, plan.String(), steps.String())
}

// git runs git in dir with the test's environment.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a git repository at dir, on branch main, with one commit (a README), and
// returns that commit.
func newRepo(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("the project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "README")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
	return git(t, dir, "rev-parse", "HEAD")
}

// recordedCommits are the runtime's commits a state records, oldest first, with their steps.
func recordedCommits(st *statefmt.HarnessState) (commits, steps []string) {
	for _, r := range st.ToolCallHistory {
		if r.CallName != harness.CommitRecord {
			continue
		}
		var a struct{ Step string }
		var d struct{ Commit string }
		_ = json.Unmarshal(r.Arguments, &a)
		_ = json.Unmarshal(r.Result.Data, &d)
		commits, steps = append(commits, d.Commit), append(steps, a.Step)
	}
	return commits, steps
}

func restoreFrom(t *testing.T, db, id string) *statefmt.HarnessState {
	t.Helper()
	s, err := store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Restore(id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkStepCommits checks the branch after a run with commits per step: the base commit, then
// one commit per step in plan order (each holding the files written so far), HEAD at the last
// one the state records, the work tree clean, and the trailers naming the harness, the step and
// the checkpoint that recorded it.
func checkStepCommits(t *testing.T, db, ws, id string, n int) {
	t.Helper()
	st := restoreFrom(t, db, id)
	if st.Status != statefmt.StatusCompleted {
		t.Fatalf("harness %s is %s (%s)", id, st.Status, st.StatusReason)
	}
	commits, steps := recordedCommits(st)
	want := []string{""}
	for i := range n {
		want = append(want, fmt.Sprintf("s%d", i))
	}
	if !slices.Equal(steps, want) {
		t.Fatalf("the state records commits for %q, want %q", steps, want)
	}
	log := strings.Split(git(t, ws, "log", "--reverse", "--format=%H%x09%(trailers:key=Harness-Id,valueonly,separator=%x2C)%x09%(trailers:key=Step-Id,valueonly,separator=%x2C)%x09%(trailers:key=Checkpoint,valueonly,separator=%x2C)"), "\n")
	if len(log) != n+1 {
		t.Fatalf("the branch has %d commits, want %d:\n%s", len(log), n+1, strings.Join(log, "\n"))
	}
	for i, line := range log {
		f := strings.Split(line, "\t")
		if f[0] != commits[i] || f[1] != id || f[2] != want[i] || f[3] == "" {
			t.Fatalf("commit %d of the branch is %q; the state records %s for step %q", i, line, commits[i], want[i])
		}
		if i > 0 {
			files := git(t, ws, "ls-tree", "--name-only", f[0])
			for j := range i {
				if !strings.Contains(files, fmt.Sprintf("s%d.txt", j)) {
					t.Fatalf("step s%d's commit lacks s%d.txt: %s", i-1, j, files)
				}
			}
			var journal []string
			for j := range i {
				journal = append(journal, fmt.Sprintf("s%d", j))
			}
			if p := git(t, ws, "show", f[0]+":journal.txt"); p != strings.Join(journal, "\n") {
				t.Fatalf("step s%d's commit has journal.txt %q", i-1, p)
			}
		}
	}
	if head := git(t, ws, "rev-parse", "HEAD"); head != commits[len(commits)-1] {
		t.Fatalf("HEAD is %s, the last checkpoint's commit %s", head, commits[len(commits)-1])
	}
	if status := git(t, ws, "status", "--porcelain", "--untracked-files=all"); status != "" {
		t.Fatalf("the work tree is not at the last checkpoint's commit:\n%s", status)
	}
}

// A run killed in a step, resumed: the workspace is brought back to the last checkpoint's
// commit (the step's re-run appends to the journal once), what the step had written is kept on
// a side ref (untracked files too), and the step runs again and commits once.
func TestResumeAfterACrashBringsTheWorkspaceBackToTheCheckpointsCommit(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	// s1 writes its files, then sleeps: long enough to be killed in.
	src := strings.Replace(commitTask("k", ws, 3, "10ms"), "s1 >> journal.txt\"}}\n          - {sleep: 10ms}", "s1 >> journal.txt\"}}\n          - {sleep: 1500ms}", 1)
	cmd := child("--store", db, "run", writeTask(t, dir, "k.yaml", src), "--json")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	// (A step's start and tool calls are evented later: watch its files.)
	killWhenS1Wrote(t, cmd, ws)
	if got := readFile(t, filepath.Join(ws, "journal.txt")); got != "s0\ns1\n" {
		t.Fatalf("killed at the wrong time: journal.txt is %q", got)
	}
	s0 := git(t, ws, "rev-parse", "HEAD")

	// The resume brings the files back before s1 starts again.
	res := child("--store", db, "resume", "k", "--json")
	rout, _ := res.StdoutPipe()
	var stderr bytes.Buffer
	res.Stderr = &stderr
	if err := res.Start(); err != nil {
		t.Fatal(err)
	}
	rsc := bufio.NewScanner(rout)
	var warning string
	for rsc.Scan() {
		if strings.Contains(rsc.Text(), "workspace brought back") {
			warning = rsc.Text()
		}
		if strings.Contains(rsc.Text(), `"type":"step_started"`) {
			break
		}
	}
	if !strings.Contains(warning, "refs/harness-edge/k/inflight-1") {
		t.Fatalf("no warning names the side ref: %q", warning)
	}
	// (s1 runs again at once: that the files were brought back shows in its commit below,
	// whose journal.txt has s1 once.)
	for rsc.Scan() {
	}
	if err := res.Wait(); err != nil {
		t.Fatalf("resume: %v: %s", err, stderr.String())
	}
	inflight := "refs/harness-edge/k/inflight-1"
	if parent := git(t, ws, "rev-parse", inflight+"^"); parent != s0 {
		t.Fatalf("the side ref's parent is %s, not s0's commit %s", parent, s0)
	}
	if got := git(t, ws, "show", inflight+":s1.txt"); got != "step 1" {
		t.Fatalf("the side ref holds s1.txt %q", got)
	}
	if got := git(t, ws, "show", inflight+":journal.txt"); got != "s0\ns1" {
		t.Fatalf("the side ref holds journal.txt %q", got)
	}
	checkStepCommits(t, db, ws, "k", 3)
	if refs := git(t, ws, "for-each-ref", "--format=%(refname)", "refs/harness-edge/"); refs != inflight {
		t.Fatalf("side refs: %q", refs)
	}
}

// A harness killed in a step frees the workspace lock, and another harness may take the
// workspace over and complete before the first one resumes. The resume must not reset the
// branch under that harness's commits: they stay on the branch and in the work tree, and the
// resumed harness goes on on top of them.
func TestResumeAfterACrashKeepsTheCommitsOfAHarnessThatTookTheWorkspaceOver(t *testing.T) {
	dir, db, ws := killedInAStep(t)

	// Another harness takes the free workspace over and completes.
	other := fmt.Sprintf("id: o\nagent: A\nautonomy: 5\nworkspace: {path: %s, commit: step}\nagents:\n  A:\n    driver: script\n    tools: [write_file]\n"+
		"    script:\n      plan:\n        - {id: o1, description: the other work, agent: A}\n      steps:\n        o1:\n"+
		"          - {tool: write_file, args: {path: other.txt, content: \"the other harness's work\"}}\n", ws)
	if out, err := child("--store", db, "run", writeTask(t, dir, "o.yaml", other)).CombinedOutput(); err != nil {
		t.Fatalf("run o: %v: %s", err, out)
	}
	oHead := git(t, ws, "rev-parse", "HEAD")

	res := child("--store", db, "resume", "k", "--json")
	out, err := res.CombinedOutput()
	if err != nil {
		t.Fatalf("resume k: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "harness o committed on top of it") {
		t.Fatalf("no warning says the workspace was taken over:\n%s", out)
	}
	if e := exec.Command("git", "-C", ws, "merge-base", "--is-ancestor", oHead, "HEAD").Run(); e != nil {
		t.Fatalf("harness o's last commit %s is no longer on the branch:\n%s", oHead, git(t, ws, "log", "--oneline", "--all"))
	}
	if got := readFile(t, filepath.Join(ws, "other.txt")); got != "the other harness's work" {
		t.Fatalf("other.txt is %q", got)
	}
	st := restoreFrom(t, db, "k")
	commits, _ := recordedCommits(st)
	if st.Status != statefmt.StatusCompleted || git(t, ws, "rev-parse", "HEAD") != commits[len(commits)-1] {
		t.Fatalf("k is %s; HEAD %s, its last commit %s", st.Status, git(t, ws, "rev-parse", "HEAD"), commits[len(commits)-1])
	}
	if status := git(t, ws, "status", "--porcelain", "--untracked-files=all"); status != "" {
		t.Fatalf("the work tree is not clean:\n%s", status)
	}
}

// killedInAStep runs harness k (three steps, each committed) and kills it with SIGKILL in its
// second step, once that step has written its files.
func killedInAStep(t *testing.T) (dir, db, ws string) {
	t.Helper()
	dir = t.TempDir()
	db, ws = filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	src := strings.Replace(commitTask("k", ws, 3, "10ms"), "s1 >> journal.txt\"}}\n          - {sleep: 10ms}", "s1 >> journal.txt\"}}\n          - {sleep: 1500ms}", 1)
	cmd := child("--store", db, "run", writeTask(t, dir, "k.yaml", src), "--json")
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killWhenS1Wrote(t, cmd, ws)
	return dir, db, ws
}

// killWhenS1Wrote kills cmd with SIGKILL once step s1 of commitTask has written its files.
func killWhenS1Wrote(t *testing.T, cmd *exec.Cmd, ws string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(ws, "journal.txt")); string(b) == "s0\ns1\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("s1 did not write its files")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// A sub-agent of the harness is not another harness: its commits (merged into the branch
// within the step in flight) go back with that step, as the harness's own do.
func TestResumeAfterACrashBringsBackASubAgentsCommitsWithTheStep(t *testing.T) {
	_, db, ws := killedInAStep(t)
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "--quiet", "-m", "the sub-agent's step", "--trailer", "Harness-Id: k.s1")
	out, err := child("--store", db, "resume", "k", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("resume k: %v: %s", err, out)
	}
	if strings.Contains(string(out), "committed on top of it") || !strings.Contains(string(out), "workspace brought back") {
		t.Fatalf("the sub-agent's commit was taken for another harness's:\n%s", out)
	}
	checkStepCommits(t, db, ws, "k", 3)
}

// The crash test: a run with commits per step is killed with SIGKILL at random instants (in
// steps, in commits, between a commit and its checkpoint) at least 30 times, and resumed until
// it completes. Every step's commit is on the branch once, in order; HEAD is the last
// checkpoint's commit; nothing the steps wrote is left uncommitted.
func TestKill9WithCommitsPerStep(t *testing.T) {
	const steps = 60
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	taskFile := writeTask(t, dir, "c.yaml", commitTask("c", ws, steps, "2ms"))
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills, runs := 0, 0
	for ; ; runs++ {
		if runs > 400 {
			t.Fatalf("not done after %d runs (%d kills)", runs, kills)
		}
		args := []string{"--store", db, "resume", "c", "--json"}
		if runs == 0 {
			args = []string{"--store", db, "run", taskFile, "--json"}
		}
		cmd := child(args...)
		out, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 1 + r.IntN(4)
		sc := bufio.NewScanner(out)
		seen := 0
		for seen < killAfter && sc.Scan() {
			seen++
		}
		killed := false
		if seen == killAfter && kills < 30 {
			time.Sleep(time.Duration(r.IntN(20000)) * time.Microsecond)
			killed = cmd.Process.Signal(syscall.SIGKILL) == nil
		}
		for sc.Scan() {
		}
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && killed {
			kills++
			continue
		}
		if code := cmd.ProcessState.ExitCode(); code == ExitOK || runs > 0 && strings.Contains(stderr.String(), "harness c is completed") {
			break
		} else {
			t.Fatalf("run %d (%v): exit %d: %s", runs, args, code, stderr.String())
		}
	}
	if kills < 30 {
		t.Fatalf("only %d runs were killed", kills)
	}
	checkStepCommits(t, db, ws, "c", steps)
	refs := git(t, ws, "for-each-ref", "--format=%(refname)", "refs/harness-edge/c/")
	t.Logf("%d kills in %d runs; %d side refs kept what the interrupted steps had done", kills, runs+1, len(strings.Fields(refs)))
}

// isolatedTask: one step that writes a file named after the harness and sleeps, in a worktree
// of repo of its own.
func isolatedTask(id, repo, extra string) string {
	return fmt.Sprintf(`id: %s
agent: A
autonomy: 5
workspace: {repo: %s, isolate: worktree, commit: step%s}
agents:
  A:
    driver: script
    tools: [write_file, bash]
    script:
      plan:
        - {id: work, description: work alone, agent: A}
      steps:
        "*":
          - {tool: write_file, args: {path: %s.txt, content: "by %s"}}
          - {tool: bash, args: {command: "sleep 1; ls"}}
`, id, repo, extra, id, id)
}

// With isolate: worktree each harness works in a worktree of its own, on a branch named after
// it: two harnesses on one repository run at the same time in the daemon, neither sees the
// other's files, and the repository's own work tree is untouched; the branches stay for review.
// With merge: fast-forward, the repository's branch is fast-forwarded to the harness's.
func TestIsolatedHarnessesWorkInTheirOwnWorktrees(t *testing.T) {
	dir := t.TempDir()
	db, repo := filepath.Join(dir, "store"), filepath.Join(dir, "repo")
	start := newRepo(t, repo)
	startDaemon(t, db)
	for _, id := range []string{"a", "b"} {
		if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, id+".yaml", isolatedTask(id, repo, ""))); code != ExitOK {
			t.Fatalf("submit %s: exit %d: %s%s", id, code, out, stderr)
		}
	}
	a, b := waitStatus(t, db, "a", statefmt.StatusCompleted), waitStatus(t, db, "b", statefmt.StatusCompleted)
	ca, cb := a.ToolCallHistory[2], b.ToolCallHistory[2] // the base commit, write_file, bash
	if ca.CallName != "bash" || !ca.Timestamp.Before(cb.Timestamp.Add(cb.Duration)) || !cb.Timestamp.Before(ca.Timestamp.Add(ca.Duration)) {
		t.Fatalf("the isolated harnesses did not run together: %+v %+v", ca, cb)
	}
	for _, c := range []struct {
		id, other string
		ls        string
	}{{"a", "b", ca.Result.Output}, {"b", "a", cb.Result.Output}} {
		if !strings.Contains(c.ls, c.id+".txt") || strings.Contains(c.ls, c.other+".txt") {
			t.Fatalf("harness %s saw %q in its workspace", c.id, c.ls)
		}
		branch := "harness-edge/" + c.id
		files := git(t, repo, "ls-tree", "--name-only", branch)
		if files != "README\n"+c.id+".txt" {
			t.Fatalf("branch %s holds %q", branch, files)
		}
		if base := git(t, repo, "rev-list", "--max-parents=0", branch); base != start || git(t, repo, "merge-base", branch, "main") != start {
			t.Fatalf("branch %s does not start from the repository's HEAD", branch)
		}
		wt := filepath.Join(dir, ".repo.harness-edge-worktrees", c.id)
		if got := readFile(t, filepath.Join(wt, c.id+".txt")); got != "by "+c.id {
			t.Fatalf("worktree %s: %q", wt, got)
		}
		if _, err := os.Stat(filepath.Join(wt, c.other+".txt")); err == nil {
			t.Fatalf("worktree of %s has %s's file", c.id, c.other)
		}
	}
	if head, status := git(t, repo, "rev-parse", "HEAD"), git(t, repo, "status", "--porcelain"); head != start || status != "" {
		t.Fatalf("the repository moved (%s) or changed: %q", head, status)
	}

	// merge: fast-forward.
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "m.yaml", isolatedTask("m", repo, ", merge: fast-forward"))); code != ExitOK {
		t.Fatalf("submit m: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "m", statefmt.StatusCompleted)
	if head, branch := git(t, repo, "rev-parse", "main"), git(t, repo, "rev-parse", "harness-edge/m"); head != branch {
		t.Fatalf("main is at %s, not fast-forwarded to harness-edge/m %s", head, branch)
	}
	if got := readFile(t, filepath.Join(repo, "m.txt")); got != "by m" {
		t.Fatalf("the repository's work tree after the merge: m.txt %q", got)
	}

	// delete removes the worktree; the branch stays for review.
	wt := filepath.Join(dir, ".repo.harness-edge-worktrees", "a")
	code, out, stderr := run(t, "--store", db, "delete", "a")
	if code != ExitOK || !strings.Contains(out, "its worktree "+wt+" was removed") {
		t.Fatalf("delete a: exit %d: %s%s", code, out, stderr)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("the worktree of a deleted harness is still there: %v", err)
	}
	if list := git(t, repo, "worktree", "list", "--porcelain"); strings.Contains(list, wt) {
		t.Fatalf("git still lists the deleted harness's worktree:\n%s", list)
	}
	if files := git(t, repo, "ls-tree", "--name-only", "harness-edge/a"); files != "README\na.txt" {
		t.Fatalf("branch harness-edge/a after the delete holds %q", files)
	}
}

// A rollback takes the files back with the state: resumed after a rollback to a checkpoint
// named when s0 had completed (at s1's gate), the harness runs s1 and s2 again on s0's commit
// (the journal gets each once), and the work it had done after that point is kept on a side
// ref.
func TestRollbackBringsTheWorkspaceBackWithTheState(t *testing.T) {
	dir := t.TempDir()
	ws, db := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	src := strings.Replace(commitTask("rb", ws, 3, "1ms"), "autonomy: 5", "autonomy: 3", 1)
	src = strings.Replace(src, "{id: s1, description: step 1,", "{id: s1, critical: true, description: step 1,", 1)
	f := writeTask(t, dir, "rb.yaml", src)
	must := func(want int, args ...string) {
		t.Helper()
		if code, out := binary(t, db, args...); code != want {
			t.Fatalf("%s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
		}
	}
	must(ExitWaiting, "run", f) // s0 done, s1's gate waits
	must(ExitOK, "checkpoint", "rb", "--name", "after-s0")
	must(ExitOK, "approve", "rb", "g1")
	must(ExitOK, "resume", "rb")
	oldHead := git(t, ws, "rev-parse", "HEAD")
	must(ExitOK, "rollback", "rb", "--to", "after-s0")
	must(ExitWaiting, "resume", "rb") // the gate is asked again
	must(ExitOK, "approve", "rb", "g1")
	must(ExitOK, "resume", "rb")
	checkStepCommits(t, db, ws, "rb", 3)
	refs := git(t, ws, "for-each-ref", "--format=%(refname)", "refs/harness-edge/rb/")
	if refs == "" || git(t, ws, "rev-parse", refs+"^") != oldHead {
		t.Fatalf("the work after the rollback's checkpoint is not kept on a side ref over %s: %q", oldHead, refs)
	}
}

// With subAgents: worktree a sub-agent works in a worktree of its own, on a branch made from its
// parent's after the parent's last commit, commits its own steps there, and its branch is
// fast-forwarded into the parent's worktree when it completes: the parent's next step sees
// its files, the repository's own branch is untouched, and delete removes both worktrees.
func TestSubAgentsWorkInWorktreesOfTheirOwn(t *testing.T) {
	dir := t.TempDir()
	db, repo := filepath.Join(dir, "store"), filepath.Join(dir, "repo")
	start := newRepo(t, repo)
	src := fmt.Sprintf(`id: p
agent: A
autonomy: 5
workspace: {repo: %s, isolate: worktree, commit: step, subAgents: worktree}
agents:
  A:
    driver: script
    tools: [write_file, bash]
    script:
      steps:
        a: [{tool: write_file, args: {path: a.txt, content: "by A"}}]
        c: [{tool: bash, args: {command: "cat a.txt b.txt"}}]
  B:
    driver: script
    tools: [write_file, bash]
    script:
      steps:
        "*": [{tool: bash, args: {command: "cat a.txt"}}, {tool: write_file, args: {path: b.txt, content: " and B"}}]
plan:
  - {id: a, description: write a, agent: A}
  - {id: b, description: write b, agent: B, dependsOn: [a]}
  - {id: c, description: read both, agent: A, dependsOn: [b]}
`, repo)
	if code, out := binary(t, db, "run", writeTask(t, dir, "p.yaml", src)); code != ExitOK {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	st := waitStatus(t, db, "p", statefmt.StatusCompleted)
	if out := *st.Plan.Steps[2].Output; !strings.Contains(out, "by A and B") {
		t.Fatalf("the parent's step after the sub-agent read %q", out)
	}
	child := st.Plan.Steps[1].ChildHarnessID
	wt := func(id string) string { return filepath.Join(dir, ".repo.harness-edge-worktrees", id) }
	if got := readFile(t, filepath.Join(wt(child), "b.txt")); got != " and B" {
		t.Fatalf("the sub-agent's worktree %s: b.txt %q", wt(child), got)
	}
	// The sub-agent's branch starts at the parent's commit of step a, and the parent's branch
	// holds its commits.
	pb, cb := "harness-edge/p", "harness-edge/"+child
	if files := git(t, repo, "ls-tree", "--name-only", cb); files != "README\na.txt\nb.txt" {
		t.Fatalf("branch %s holds %q", cb, files)
	}
	if git(t, repo, "merge-base", "--is-ancestor", cb, pb) != "" || git(t, repo, "log", "--format=%s", pb+".."+cb) != "" {
		t.Fatalf("branch %s is not in %s", cb, pb)
	}
	if log := git(t, repo, "log", "--format=%(trailers:key=Harness-Id,valueonly)", pb); !strings.Contains(log, child) || !strings.Contains(log, "p") {
		t.Fatalf("the parent's branch lacks the sub-agent's commits:\n%s", log)
	}
	if head, status := git(t, repo, "rev-parse", "HEAD"), git(t, repo, "status", "--porcelain"); head != start || status != "" {
		t.Fatalf("the repository moved (%s) or changed: %q", head, status)
	}
	// delete takes both worktrees; the branches stay.
	if code, out := binary(t, db, "delete", "p"); code != ExitOK {
		t.Fatalf("delete: exit %d\n%s", code, out)
	}
	for _, id := range []string{"p", child} {
		if _, err := os.Stat(wt(id)); !os.IsNotExist(err) {
			t.Fatalf("the worktree of %s is still there after delete: %v", id, err)
		}
	}
	if git(t, repo, "rev-parse", "--verify", cb) == "" {
		t.Fatal("the sub-agent's branch went with the delete")
	}
}
