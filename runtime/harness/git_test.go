package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// git_commit goes through the pipeline like any side-effecting tool: journaled (an intent
// before it runs, a receipt after), recorded, and refused to an agent that does not list it.
func TestGitCommitIsAJournaledSideEffect(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	h, err := e.m.Create(parseTask(t, fmt.Sprintf(`id: g
agent: A
autonomy: 5
workspace: %s
agents:
  A: {driver: script, tools: [write_file, git_commit, git_log], script: {steps: {"*": [
        {tool: write_file, args: {path: a.txt, content: "a"}},
        {tool: git_commit, args: {message: "add a"}},
        {tool: git_log, args: {limit: 1}}]}}}
  B: {driver: script, tools: [write_file], script: {steps: {"*": [{tool: git_commit, args: {message: "not allowed"}}]}}}
plan:
  - {id: s1, description: commit, agent: A}
  - {id: s2, description: may not commit, agent: B, dependsOn: [s1]}
`, ws)))
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Run(context.Background())
	st := h.State()
	var actions []string
	for _, ev := range e.rec.of(event.SideEffect) {
		actions = append(actions, ev.Tool+":"+ev.Action)
	}
	if strings.Join(actions, ",") != "git_commit:intent,git_commit:receipt" {
		t.Fatalf("side-effect events: %v", actions)
	}
	rec := st.ToolCallHistory[1]
	head, _ := exec.Command("git", "-C", ws, "rev-parse", "HEAD").Output()
	if rec.CallName != "git_commit" || !rec.Result.Success || string(rec.Result.Data) != `{"commit":"`+strings.TrimSpace(string(head))+`"}` {
		t.Fatalf("git_commit's record: %+v", rec)
	}
	if log := st.ToolCallHistory[2].Result.Output; !strings.Contains(log, "add a") {
		t.Fatalf("git_log: %q", log)
	}
	s2 := st.Plan.Steps[1]
	if s2.Status != statefmt.StepFailed || !strings.Contains(*s2.Error, "may not call git_commit") {
		t.Fatalf("an agent without git_commit committed: %+v", s2)
	}
}

// With commit: step, a workspace inside another repository's work tree (not its top) is
// refused before the harness starts: nothing is committed there, and the harness stays as it was.
func TestCommitsPerStepRefuseAWorkspaceInsideAnotherRepository(t *testing.T) {
	e := newEnv(t)
	outer := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", outer).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	ws := outer + "/sub"
	h, err := e.m.Create(parseTask(t, fmt.Sprintf(`id: nested
agent: A
workspace: {path: %s, commit: step}
agents:
  A: {driver: script, tools: [write_file], script: {steps: {"*": [{tool: write_file, args: {path: a.txt, content: "a"}}]}}}
plan:
  - {id: s1, description: write, agent: A}
`, ws)))
	if err != nil {
		t.Fatal(err)
	}
	err = h.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "is inside the git work tree of "+outer) {
		t.Fatalf("Run: %v", err)
	}
	if st := h.State(); st.Status != statefmt.StatusCreated || len(st.ToolCallHistory) != 0 {
		t.Fatalf("the refused harness changed: %s, %d records", st.Status, len(st.ToolCallHistory))
	}
	if out, _ := exec.Command("git", "-C", outer, "log", "--oneline").CombinedOutput(); !strings.Contains(string(out), "does not have any commits") {
		t.Fatalf("something was committed to the outer repository: %s", out)
	}
}

// baseDyingStore dies (refuses every checkpoint from then on) at the first checkpoint that
// records a runtime commit: the base, committed when a harness with commits per step starts.
type baseDyingStore struct {
	harness.Store
	dead bool
}

func (d *baseDyingStore) PersistWith(st *statefmt.HarnessState, x store.Extras) (store.Checkpoint, error) {
	for _, rec := range st.ToolCallHistory {
		if rec.CallName == harness.CommitRecord {
			d.dead = true
		}
	}
	if d.dead {
		return store.Checkpoint{}, errors.New("the process died")
	}
	return d.Store.PersistWith(st, x)
}

// A process that dies after the base commit and before the checkpoint that records it leaves
// the base on the branch unrecorded: the resume finds it and goes on from it. The base of a
// workspace that was no repository is its root commit, the last line of git's log (a line that
// ends in the tab before its empty Step-Id); it was missed there, and a second base was made.
func TestAResumeFindsTheBaseCommitADeadProcessDidNotRecord(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	src := fmt.Sprintf(`id: c
agent: A
autonomy: 5
workspace: {path: %s, commit: step}
agents:
  A: {driver: script, tools: [write_file], script: {steps: {"*": [{tool: write_file, args: {path: a.txt, content: "a"}}, {output: done}]}}}
plan:
  - {id: s0, description: one, agent: A}
  - {id: s1, description: two, agent: A, dependsOn: [s0]}
`, ws)
	dying := harness.NewManager(&baseDyingStore{Store: e.store}, harness.Options{Clock: e.clock, StartCheckpoint: -1})
	h, err := dying.Create(parseTask(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err == nil {
		t.Fatal("the run went through a process that died")
	}
	base, err := exec.Command("git", "-C", ws, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("no base commit before the process died: %v", err)
	}
	e.open()
	if h, err = e.m.ResumeFromCheckpoint("c"); err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	log, err := exec.Command("git", "-C", ws, "log", "--reverse", "--format=%H %(trailers:key=Step-Id,valueonly,separator=%x2C)").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) != 3 || strings.TrimSpace(lines[0]) != strings.TrimSpace(string(base)) || !strings.HasSuffix(lines[1], " s0") || !strings.HasSuffix(lines[2], " s1") {
		t.Fatalf("the branch, oldest first (want the base the dead process made, then s0 and s1):\n%s", log)
	}
}
