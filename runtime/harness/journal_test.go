package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/clock"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
)

// JournalTask: step s calls the side-effecting tool "deploy" (it logs a start line, then waits
// for the file "go" before it finishes), then the plain tool "wait" (which waits for "go2").
func journalTask(ws, replay string) string {
	return fmt.Sprintf(`id: j
agent: A
autonomy: 4
workspace: %s
agents:
  A:
    driver: script
    tools: [deploy, wait]
    script:
      plan: [{id: s, description: deploy, agent: A}]
      steps:
        s: [{tool: deploy, args: {env: prod}}, {tool: wait, args: {}}, {output: deployed}]
tools:
  deploy: {command: [sh, -c, 'echo start >> ledger; while [ ! -f go ]; do sleep 0.005; done; echo "{\"version\": 7}"'], sideEffects: true, replay: %s}
  wait: {command: [sh, -c, 'touch waiting; while [ ! -f go2 ]; do sleep 0.005; done']}
`, ws, replay)
}

// InterruptWhen runs h, cancelling it once the file appears in the workspace (with content,
// but for the empty marker "waiting").
func interruptWhen(t *testing.T, h *harness.Harness, ws, file string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if fi, err := os.Stat(filepath.Join(ws, file)); err == nil && (fi.Size() > 0 || file == "waiting") {
				cancel()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return h.Run(ctx)
}

func ledgerStarts(ws string) int {
	b, _ := os.ReadFile(filepath.Join(ws, "ledger"))
	return strings.Count(string(b), "start")
}

func touch(t *testing.T, p string) {
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// An interruption while a side-effecting call runs leaves an intent without a receipt; the
// resume applies the tool's replay policy.
func TestReplayPolicies(t *testing.T) {
	for _, c := range []struct {
		replay, decision string // decision: for ask, "approve" or "reject"
		starts           int    // runs of deploy in all
		status           statefmt.Status
	}{
		{"retry", "", 2, statefmt.StatusCompleted},
		{"skip", "", 1, statefmt.StatusCompleted},
		{"ask", "approve", 2, statefmt.StatusCompleted},
		{"ask", "reject", 1, statefmt.StatusFailed},
	} {
		t.Run(c.replay+c.decision, func(t *testing.T) {
			ws := t.TempDir()
			e := newEnv(t)
			h, err := e.m.Create(parseTask(t, journalTask(ws, c.replay)))
			if err != nil {
				t.Fatal(err)
			}
			if err := interruptWhen(t, h, ws, "ledger"); !errors.Is(err, harness.ErrPaused) {
				t.Fatalf("interrupted run: %v", err)
			}
			e.open()
			st, _ := e.store.Restore("j")
			if len(st.SideEffects) != 1 || st.SideEffects[0].Result != nil || st.SideEffects[0].Tool != "deploy" {
				t.Fatalf("journal after the interruption: %+v", st.SideEffects)
			}
			touch(t, filepath.Join(ws, "go"))
			touch(t, filepath.Join(ws, "go2"))
			h, _ = e.m.ResumeFromCheckpoint("j")
			err = h.Run(context.Background())
			if c.replay == "ask" {
				if !errors.Is(err, harness.ErrWaiting) {
					t.Fatalf("ask: %v", err)
				}
				g := h.State().Gates[0]
				if g.Kind != harness.GateReplay || g.StepID != "s" {
					t.Fatalf("gate %+v", g)
				}
				if _, err := e.m.Decide("j", g.ID, c.decision == "approve", "not twice"); err != nil {
					t.Fatal(err)
				}
				err = h.Run(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			st = h.State()
			if n := ledgerStarts(ws); n != c.starts || st.Status != c.status || len(st.SideEffects) != 0 {
				t.Fatalf("deploy ran %d times (want %d), harness %s (%s), journal %+v", n, c.starts, st.Status, st.StatusReason, st.SideEffects)
			}
			if c.decision == "reject" && !strings.Contains(st.StatusReason, "rejected it: not twice") {
				t.Fatalf("reason %q", st.StatusReason)
			}
			if len(st.ToolCallHistory) == 0 || st.ToolCallHistory[0].CallName != "deploy" {
				t.Fatalf("history %+v", st.ToolCallHistory)
			}
			if msg := checkEvents(e); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// A call whose receipt is in the journal is never run again, whatever the policy: the re-run of
// an interrupted step gets the recorded result.
func TestReceiptIsReplayedNotRerun(t *testing.T) {
	ws := t.TempDir()
	touch(t, filepath.Join(ws, "go"))
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, journalTask(ws, "retry")))
	if err != nil {
		t.Fatal(err)
	}
	if err := interruptWhen(t, h, ws, "waiting"); !errors.Is(err, harness.ErrPaused) {
		t.Fatalf("interrupted run: %v", err)
	}
	e.open()
	st, _ := e.store.Restore("j")
	if len(st.SideEffects) != 1 || st.SideEffects[0].Result == nil || string(st.SideEffects[0].Result.Data) != `{"version":7}` {
		t.Fatalf("journal: %+v", st.SideEffects)
	}
	touch(t, filepath.Join(ws, "go2"))
	h, _ = e.m.ResumeFromCheckpoint("j")
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st = h.State()
	if n := ledgerStarts(ws); n != 1 || st.Status != statefmt.StatusCompleted || len(st.ToolCallHistory) != 2 ||
		string(st.ToolCallHistory[0].Result.Data) != `{"version":7}` {
		t.Fatalf("deploy ran %d times; %s; history %+v", n, st.Status, st.ToolCallHistory)
	}
	replayed := 0
	for _, ev := range e.rec.of(event.SideEffect) {
		if ev.Action == "replayed" {
			replayed++
		}
	}
	if replayed != 1 {
		t.Fatalf("%d replayed events", replayed)
	}
}

// Tokens the agent reports and wall-clock time count against their budgets; at autonomy 5 the
// harness fails when one is used up, at 3 a gate waits and its approval extends the budget.
func TestTokenAndWallClockBudgets(t *testing.T) {
	for _, c := range []struct {
		name, budget, action string
		autonomy             int
	}{
		{"tokens", "tokens: 1000", "{tokens: 600}", 5},
		{"tokens", "tokens: 1000", "{tokens: 600}", 3},
		{"wallClock", "wallClock: 10s", "{sleep: 6s}", 5},
		{"wallClock", "wallClock: 10s", "{sleep: 6s}", 3},
	} {
		t.Run(fmt.Sprintf("%s-%d", c.name, c.autonomy), func(t *testing.T) {
			e := newEnv(t)
			h, err := e.m.Create(parseTask(t, fmt.Sprintf(`id: b
agent: A
autonomy: %d
budget: {%s}
agents:
  A:
    driver: script
    script:
      plan:
        - {id: s1, description: one, agent: A}
        - {id: s2, description: two, agent: A, dependsOn: [s1]}
        - {id: s3, description: three, agent: A, dependsOn: [s2]}
      steps:
        "*": [%s, {output: ok}]
`, c.autonomy, c.budget, c.action)))
			if err != nil {
				t.Fatal(err)
			}
			err = h.Run(context.Background())
			st := h.State()
			if c.autonomy == 5 {
				if err != nil || st.Status != statefmt.StatusFailed || !strings.Contains(st.StatusReason, "budget") ||
					st.Plan.Steps[1].Status != statefmt.StepCompleted || st.Plan.Steps[2].Status != statefmt.StepFailed {
					t.Fatalf("%v: %s (%s), steps %+v", err, st.Status, st.StatusReason, st.Plan.Steps)
				}
				return
			}
			if !errors.Is(err, harness.ErrWaiting) || st.Gates[0].Kind != "budget:"+c.name || st.Plan.Steps[2].Status != statefmt.StepReady {
				t.Fatalf("%v: gates %+v", err, st.Gates)
			}
			if _, err := e.m.Decide("b", "", true, ""); err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
				t.Fatalf("after approval: %v %s (%s)", err, h.Status(), h.State().StatusReason)
			}
			b := h.State().Budget
			if c.name == "tokens" && (b.Tokens != 2000 || b.TokensUsed != 1800) || c.name == "wallClock" && (b.WallClock != 20*time.Second || b.WallClockUsed < 18*time.Second) {
				t.Fatalf("budget after approval %+v", b)
			}
		})
	}
}

// Stopping a paused parent stops its unfinished sub-agents too; resuming a sub-agent directly is
// refused (its parent resumes it).
func TestStopCascadesAndChildrenResumeThroughTheirParent(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: p
agent: A
autonomy: 4
agents:
  A: {driver: script, script: {steps: {"*": [{output: a}]}}}
  B: {driver: script, script: {steps: {"*": [{sleep: 1s}, {output: b}]}}}
plan:
  - {id: s1, description: delegated, agent: B}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.rec.hook = func(ev event.Event) {
		if ev.Type == event.StepStarted && ev.HarnessID == "p.s1" {
			cancel()
		}
	}
	if err := h.Run(ctx); !errors.Is(err, harness.ErrPaused) {
		t.Fatalf("interrupted: %v", err)
	}
	e.rec.hook = nil
	e.open()
	if _, err := e.m.ResumeFromCheckpoint("p.s1"); err == nil || !strings.Contains(err.Error(), "resume p") {
		t.Fatalf("resuming the child directly: %v", err)
	}
	if err := e.m.Stop("p"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p", "p.s1"} {
		st, err := e.store.Restore(id)
		if err != nil || st.Status != statefmt.StatusFailed || st.StatusReason != "stopped by request" {
			t.Fatalf("%s after stop: %v %s (%s)", id, err, st.Status, st.StatusReason)
		}
	}
	assertChildView(t, e, "p", "p.s1", statefmt.StatusFailed)
}

// assertChildView checks that the parent's stored view of a sub-agent says what the sub-agent
// says of itself.
func assertChildView(t *testing.T, e *env, parent, child string, want statefmt.Status) {
	t.Helper()
	p, err := e.store.Restore(parent)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.store.Restore(child)
	if err != nil {
		t.Fatal(err)
	}
	r := p.SubAgentResults[child]
	if c.Status != want || r.Status != want {
		t.Fatalf("%s is %s (%s); its parent lists it %s", child, c.Status, c.StatusReason, r.Status)
	}
	if want == statefmt.StatusFailed && (r.Error == nil || *r.Error != c.StatusReason) {
		t.Fatalf("the parent's error for %s: %v, the child's reason %q", child, r.Error, c.StatusReason)
	}
}

// Stopping a harness while its sub-agent runs stops both, and the parent records the sub-agent
// as it ended (not as it was spawned).
func TestStopWhileASubAgentRunsUpdatesTheParentsView(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, `id: p
agent: A
autonomy: 4
agents:
  A: {driver: script, script: {steps: {"*": [{output: a}]}}}
  B: {driver: script, script: {steps: {"*": [{sleep: 2s}, {output: b}]}}}
plan:
  - {id: s1, description: delegated, agent: B}
`))
	if err != nil {
		t.Fatal(err)
	}
	e.rec.hook = func(ev event.Event) {
		if ev.Type == event.StepStarted && ev.HarnessID == "p.s1" {
			if err := e.m.Stop("p"); err != nil {
				t.Error(err)
			}
		}
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatalf("stopped: %v", err)
	}
	e.rec.hook = nil
	assertChildView(t, e, "p", "p.s1", statefmt.StatusFailed)
	if st, _ := e.store.Restore("p"); st.Status != statefmt.StatusFailed || st.StatusReason != "stopped by request" {
		t.Fatalf("p after stop: %s (%s)", st.Status, st.StatusReason)
	}
}

// The direct path cannot wait for a human: a task whose plan has a gated step is refused before
// anything runs, rather than run without the approval its autonomy level asks for.
func TestDirectPathRefusesGatedPlans(t *testing.T) {
	ws := t.TempDir()
	src := fmt.Sprintf(`longRunning: false
agent: A
autonomy: 3
workspace: %s
agents:
  A: {driver: script, tools: [write_file], script: {steps: {"*": [{tool: write_file, args: {path: x.txt, content: x}}]}}}
plan:
  - {id: s1, description: risky, agent: A, critical: true}
`, ws)
	_, err := harness.RunDirect(context.Background(), parseTask(t, src), clock.RealClock{})
	if err == nil || !strings.Contains(err.Error(), "cannot wait for one") {
		t.Fatalf("direct path with a critical step at autonomy 3: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "x.txt")); err == nil {
		t.Fatal("the step ran")
	}
	out, err := harness.RunDirect(context.Background(), parseTask(t, strings.Replace(src, "autonomy: 3", "autonomy: 4", 1)), clock.RealClock{})
	if err != nil || out.Status != statefmt.StatusCompleted {
		t.Fatalf("at autonomy 4: %v %+v", err, out)
	}
}
