package harness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

const phasedTask = `
id: phased
agent: A
autonomy: 5
agents:
  A:
    driver: script
    script:
      steps:
        "*": [{output: ok}]
plan:
  - {id: a1, description: implement one, agent: A, phase: implement}
  - {id: a2, description: implement two, agent: A, phase: implement}
  - {id: b1, description: review, agent: A, phase: review}
  - {id: c1, description: fix, agent: A, phase: fix}
`

func TestPhasesRunInOrderAndAreEvented(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, phasedTask))
	if err != nil {
		t.Fatal(err)
	}
	if deps := h.State().Plan.Steps[2].Dependencies; strings.Join(deps, ",") != "a1,a2" {
		t.Fatalf("b1 should depend on the whole implement phase, got %v", deps)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range e.rec.of(event.Phase) {
		got = append(got, ev.Phase+":"+ev.Action)
	}
	want := "implement:started implement:completed review:started review:completed fix:started fix:completed"
	if strings.Join(got, " ") != want {
		t.Fatalf("phase events:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if st := h.State(); st.Phase != "fix" || st.Status != statefmt.StatusCompleted {
		t.Fatalf("phase %q status %s", st.Phase, st.Status)
	}
}

func TestPhasesAreValidated(t *testing.T) {
	for name, plan := range map[string]string{
		"a step without a phase":      "  - {id: a, description: x, agent: A, phase: p1}\n  - {id: b, description: y, agent: A}\n",
		"a dependency on a later one": "  - {id: a, description: x, agent: A, phase: p1, dependsOn: [b]}\n  - {id: b, description: y, agent: A, phase: p2}\n",
	} {
		src := "agent: A\nagents: {A: {driver: script, script: {steps: {\"*\": [{output: ok}]}}}}\nplan:\n" + plan
		_, err := task.Parse("phases.yaml", []byte(src))
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if !strings.Contains(err.Error(), "phase") {
			t.Fatalf("%s: the error does not say what is wrong with the phases: %v", name, err)
		}
	}
}

// A harness cut short in its second phase resumes there after a restart, with no phase events
// repeated.
func TestPhaseSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	h, err := e.m.Create(parseTask(t, phasedTask))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.rec.hook = func(ev event.Event) {
		if ev.Type == event.StepStarted && ev.StepID == "b1" {
			cancel()
		}
	}
	if err := h.Run(ctx); !errors.Is(err, harness.ErrPaused) {
		t.Fatalf("run: %v", err)
	}
	e.rec.hook = nil
	e.open() // a restarted process
	h, err = e.m.ResumeFromCheckpoint("phased")
	if err != nil {
		t.Fatal(err)
	}
	if p := h.State().Phase; p != "review" {
		t.Fatalf("after the restart the harness is in phase %q, want review", p)
	}
	n := len(e.rec.of(event.Phase))
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var after []string
	for _, ev := range e.rec.of(event.Phase)[n:] {
		after = append(after, ev.Phase+":"+ev.Action)
	}
	if strings.Join(after, " ") != "review:completed fix:started fix:completed" {
		t.Fatalf("phase events after the restart: %v", after)
	}
}

// RealEnv is an env on the wall clock (Dream Mode's timer and real subprocesses need one).
func realEnv(t *testing.T, gov harness.Governor) *env {
	e := newEnv(t)
	e.m = harness.NewManager(e.store, harness.Options{Sinks: []event.Sink{e.rec}, Governor: gov, GovernorPoll: time.Millisecond})
	return e
}

func TestPauseKeepsItsReason(t *testing.T) {
	e := realEnv(t, nil)
	ws := t.TempDir()
	h, err := e.m.Create(parseTask(t, `
id: p
agent: A
autonomy: 5
workspace: `+ws+`
agents:
  A: {driver: script, tools: [bash], script: {steps: {"*": [{tool: bash, args: {command: "sleep 30"}}]}}}
plan: [{id: s1, description: wait, agent: A}]
`))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for !h.Running() || h.State().Plan.Steps[0].Status != statefmt.StepRunning {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		if err := e.m.Pause("p", harness.ReasonShutdown); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	if err := h.Run(context.Background()); !errors.Is(err, harness.ErrPaused) {
		t.Fatalf("run: %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("the pause did not cut the step short")
	}
	st, err := e.store.Restore("p")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != statefmt.StatusPaused || st.StatusReason != harness.ReasonShutdown || st.Plan.Steps[0].Status != statefmt.StepReady {
		t.Fatalf("stored: %s (%s), step %s", st.Status, st.StatusReason, st.Plan.Steps[0].Status)
	}
	if err := e.m.Pause("p", "again"); err != nil {
		t.Fatalf("pausing a paused harness: %v", err)
	}
}

func TestDreamIntervalFollowsAutonomy(t *testing.T) {
	for _, c := range []struct {
		autonomy int
		want     time.Duration
	}{{1, 4 * time.Minute}, {3, 4 * time.Minute}, {4, 2 * time.Minute}, {5, time.Minute}} {
		if got := harness.DreamInterval(c.autonomy, 4*time.Minute); got != c.want {
			t.Errorf("autonomy %d: %v, want %v", c.autonomy, got, c.want)
		}
	}
	if got := harness.DreamInterval(5, 200*time.Millisecond); got != 100*time.Millisecond {
		t.Errorf("the interval went below its floor: %v", got)
	}
}

const dreamTask = `
id: dream
agent: A
autonomy: 3
dream: true
checkpoint: {interval: 100ms}
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file, bash]
    script:
      steps:
        s1:
          - {tool: write_file, args: {path: a.txt, content: one}}
          - {sleep: 450ms}
          - {output: slept}
          - {tool: bash, args: {command: "test -f go || sleep 30; echo done"}}
plan: [{id: s1, description: a long step, agent: A}]
`

// Dream Mode checkpoints inside a long step, and the script driver saves at its next safe
// point; a step paused after that save goes on from it, without running its calls again.
func TestDreamCheckpointsInsideALongStepAndResumesFromTheSave(t *testing.T) {
	e := realEnv(t, nil)
	ws := t.TempDir()
	h, err := e.m.Create(parseTask(t, strings.Replace(dreamTask, "%s", ws, 1)))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if l := h.State().AgentLoopSnapshot; l != nil && l.Iteration >= 2 {
				if err := e.m.Pause("dream", "test"); err != nil {
					t.Error(err)
				}
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Error("no loop snapshot was saved")
		e.m.Pause("dream", "test")
	}()
	if err := h.Run(context.Background()); !errors.Is(err, harness.ErrPaused) {
		t.Fatalf("run: %v", err)
	}
	wg.Wait()
	var dream int
	for _, ev := range e.rec.of(event.Checkpoint) {
		if ev.Reason == "dream" {
			dream++
		}
	}
	if dream == 0 {
		t.Fatal("no Dream Mode auto-checkpoint inside the step")
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted {
		t.Fatalf("status %s (%s)", st.Status, st.StatusReason)
	}
	if _, err := os.Stat(filepath.Join(ws, "a.txt")); err == nil {
		t.Fatal("the resumed step wrote a.txt again: it did not go on from its save")
	}
	var calls []string
	for _, r := range st.ToolCallHistory {
		calls = append(calls, r.CallName)
	}
	if strings.Join(calls, ",") != "write_file,bash" || st.TotalToolCalls != 2 {
		t.Fatalf("history %v, total %d", calls, st.TotalToolCalls)
	}
	if out := *st.Plan.Steps[0].Output; out != "wrote 3 bytes to a.txt\nslept\ndone" {
		t.Fatalf("output %q", out)
	}
}

// Busy is a governor that is over its limits for its first n checks.
type busy struct {
	mu     sync.Mutex
	n      int
	checks int
	seen   func()
}

func (b *busy) Check() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.checks++
	if b.checks == 2 && b.seen != nil {
		b.seen()
	}
	if b.checks <= b.n {
		return "available memory 10 MB is below the 256 MB limit"
	}
	return ""
}

func TestGovernorHoldsStepsBackVisibly(t *testing.T) {
	gov := &busy{n: 3}
	e := realEnv(t, gov)
	var reason string
	gov.seen = func() {
		st, err := e.store.Restore("g")
		if err == nil {
			reason = st.StatusReason
		}
	}
	h, err := e.m.Create(parseTask(t, `
id: g
agent: A
autonomy: 5
agents: {A: {driver: script, script: {steps: {"*": [{output: ok}]}}}}
plan: [{id: s1, description: one, agent: A}, {id: s2, description: two, agent: A}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "waiting for resources: available memory") {
		t.Fatalf("while it waited the stored state said %q", reason)
	}
	evs := e.rec.of(event.Governor)
	if len(evs) != 2 || evs[0].Action != "waiting" || evs[1].Action != "resumed" || evs[1].WaitMs <= 0 || evs[0].StepID != "s1" {
		t.Fatalf("governor events: %+v", evs)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted || st.StatusReason != "" {
		t.Fatalf("status %s (%s)", st.Status, st.StatusReason)
	}
	for _, ev := range e.rec.of(event.StepCompleted) {
		if ev.RSSBytes <= 0 {
			t.Fatalf("step_completed without RSS: %+v", ev)
		}
	}
}

// Release forgets a finished harness and leaves a running one alone; a released harness loads
// again from the store.
func TestReleaseForgetsWhatIsDone(t *testing.T) {
	e := realEnv(t, nil)
	h, err := e.m.Create(parseTask(t, `
id: rel
agent: A
autonomy: 5
workspace: `+t.TempDir()+`
agents:
  A: {driver: script, tools: [bash], script: {steps: {"*": [{tool: bash, args: {command: "sleep 0.3"}}, {output: ok}]}}}
plan: [{id: s1, description: wait, agent: A}]
`))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(context.Background()) }()
	for !h.Running() {
		time.Sleep(time.Millisecond)
	}
	e.m.Release("rel")
	if !e.m.Loaded("rel") {
		t.Fatal("Release dropped a running harness")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.m.Release("rel")
	if e.m.Loaded("rel") {
		t.Fatal("a finished harness stayed loaded")
	}
	again, err := e.m.Get("rel")
	if err != nil || again == h || again.Status() != statefmt.StatusCompleted || *again.State().Plan.Steps[0].Output != "ok" {
		t.Fatalf("reloaded: %v", err)
	}
}
