package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
)

// RandomTask writes a task file with a random plan (a DAG) whose steps write files, output
// text, sleep, and (flaky) fail transiently, never more often than the retries allow; permanent
// adds permanent failures.
func randomTask(r *rand.Rand, id, workspace string, permanent, flaky bool) string {
	n := 1 + r.IntN(7)
	var plan, steps strings.Builder
	for i := range n {
		var deps []string
		for j := range i {
			if r.IntN(3) == 0 {
				deps = append(deps, fmt.Sprintf("s%d", j))
			}
		}
		fmt.Fprintf(&plan, "        - {id: s%d, description: step %d, agent: A, dependsOn: [%s]}\n", i, i, strings.Join(deps, ", "))
		fmt.Fprintf(&steps, "        s%d:\n", i)
		for k := range 1 + r.IntN(4) {
			switch r.IntN(5) {
			case 0:
				fmt.Fprintf(&steps, "          - {tool: write_file, args: {path: s%d-%d.txt, content: \"step %d action %d\"}}\n", i, k, i, k)
			case 1:
				fmt.Fprintf(&steps, "          - {sleep: %dms}\n", 1+r.IntN(50))
			case 2:
				if flaky {
					fmt.Fprintf(&steps, "          - {fail: transient, message: \"flaky %d\", times: %d}\n", i, 1+r.IntN(2))
				} else {
					fmt.Fprintf(&steps, "          - {output: \"steady %d\"}\n", i)
				}
			case 3:
				if permanent && r.IntN(3) == 0 {
					fmt.Fprintf(&steps, "          - {fail: permanent, message: \"broken %d\"}\n", i)
				} else {
					fmt.Fprintf(&steps, "          - {tool: read_file, args: {path: s%d-%d.txt}}\n", i, k-1)
					if k == 0 {
						fmt.Fprintf(&steps, "          - {output: \"nothing to read\"}\n")
					}
				}
			default:
				fmt.Fprintf(&steps, "          - {output: \"step %d says %d\"}\n", i, r.IntN(1000))
			}
		}
	}
	return fmt.Sprintf(`id: %s
agent: A
workspace: %s
retry: {maxRetries: 2, base: 1s}
agents:
  A:
    driver: script
    tools: [read_file, write_file]
    script:
      plan:
%s      steps:
%s`, id, workspace, plan.String(), steps.String())
}

func TestRunScriptTaskEndToEnd(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	tk := parseTask(t, `
id: t1
agent: A
workspace: `+ws+`
agents:
  A:
    driver: script
    tools: [read_file, write_file]
    script:
      plan:
        - {id: write, description: write, agent: A}
        - {id: read, description: read, agent: A, dependsOn: [write]}
      steps:
        write:
          - {tool: write_file, args: {path: sub/a.txt, content: "one\ntwo\nthree\n"}}
          - {output: written}
        read:
          - {tool: read_file, args: {path: sub/a.txt, offset: 2, limit: 1}}
          - {promise: DONE}
`)
	out, err := e.m.Dispatch(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != statefmt.StatusCompleted || out.Path != "harness" || out.Output != "two\n<promise>DONE</promise>" || out.ToolCalls != 2 {
		t.Fatalf("output %+v", out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub", "a.txt")); err != nil || string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("workspace file: %q %v", b, err)
	}
	if len(e.rec.of(event.PlanCompleted)) != 1 || len(e.rec.of(event.ToolCall)) != 2 {
		t.Fatalf("events: %d plan_completed, %d tool_call", len(e.rec.of(event.PlanCompleted)), len(e.rec.of(event.ToolCall)))
	}
	// The store holds the final state, which a new process reads back.
	e.open()
	h, err := e.m.Get("t1")
	if err != nil || h.Status() != statefmt.StatusCompleted {
		t.Fatalf("after reopen: %v", err)
	}
	// The output read in place is the output of a copy of the state, and shares nothing with it.
	if got, want := h.Output("harness"), harness.OutputOf(h.State(), "harness"); !reflect.DeepEqual(got, want) {
		t.Fatalf("Output %+v, OutputOf(State()) %+v", got, want)
	} else if *got.Steps[1].Output += "!"; *h.Output("harness").Steps[1].Output != *want.Steps[1].Output {
		t.Fatal("Output shares a step's output with the live state")
	}
	if _, err := e.m.ResumeFromCheckpoint("t1"); err == nil || !strings.Contains(err.Error(), "completed: it cannot go to running") {
		t.Fatalf("resuming a completed harness: %v", err)
	}
}

// A harness makes one checkpoint per step and two besides, its creation and its start: the
// start takes the transition to running with it when nothing runs between them (the plan is
// the task's), and the checkpoint of the step that leaves nothing to run records the end. When
// the owner agent makes the plan, the transition is checkpointed before it plans: three.
func TestAHarnessCheckpointsEachStepAndTwiceBesides(t *testing.T) {
	const steps = `
  - {id: a, description: a, agent: A}
  - {id: b, description: b, agent: A, dependsOn: [a]}
  - {id: c, description: c, agent: A, dependsOn: [b]}
  - {id: d, description: d, agent: A, dependsOn: [c]}`
	for _, c := range []struct {
		name, plan, script string
		status             statefmt.Status
		want               int
	}{
		{"the task's plan", "task", `{"*": [{output: ok}]}`, statefmt.StatusCompleted, 4 + 2},
		{"the agent's plan", "agent", `{"*": [{output: ok}]}`, statefmt.StatusCompleted, 4 + 3},
		{"a last step that fails", "task", `{"*": [{output: ok}], d: [{fail: permanent, message: no}]}`, statefmt.StatusFailed, 4 + 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			defer e.close()
			// The real clock, and a step's start checkpointed only when the step runs long
			// (the default): these steps take microseconds.
			e.m = harness.NewManager(e.store, harness.Options{Sinks: []event.Sink{e.rec}})
			src := "id: cp\nagent: A\nautonomy: 5\nworkspace: " + t.TempDir() + "\nagents:\n  A: {driver: script, script: {steps: " + c.script + "}}\nplan:" + steps
			if c.plan == "agent" {
				src = "id: cp\nagent: A\nautonomy: 5\nworkspace: " + t.TempDir() + "\nagents:\n  A:\n    driver: script\n    script:\n      steps: " +
					c.script + "\n      plan:" + strings.ReplaceAll(steps, "\n  ", "\n        ")
			}
			out, err := e.m.Dispatch(context.Background(), parseTask(t, src))
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != c.status {
				t.Fatalf("%s (%s)", out.Status, out.Reason)
			}
			h, err := e.m.Get("cp")
			if err != nil {
				t.Fatal(err)
			}
			if n := h.State().CheckpointCount; n != c.want || len(e.rec.of(event.Checkpoint)) != c.want {
				t.Fatalf("%d checkpoints (%d events), want %d", n, len(e.rec.of(event.Checkpoint)), c.want)
			}
			// The end is in the last step's checkpoint: none between the step's outcome and
			// the transition.
			want := []event.Type{event.StepCompleted, event.PlanCompleted, event.StateTransition, event.Checkpoint}
			if c.status == statefmt.StatusFailed {
				want = []event.Type{event.StepFailed, event.StateTransition, event.Checkpoint}
			}
			var tail []event.Type
			for _, ev := range e.rec.events[len(e.rec.events)-len(want):] {
				tail = append(tail, ev.Type)
			}
			if !reflect.DeepEqual(tail, want) {
				t.Fatalf("the run ends with %v, want %v", tail, want)
			}
			e.open()
			if h, err := e.m.Get("cp"); err != nil || h.Status() != c.status || h.State().CheckpointCount != c.want {
				t.Fatalf("after reopening: %v", err)
			}
		})
	}
}

func TestFailureBlocksDependentsAndFailsHarness(t *testing.T) {
	e := newEnv(t)
	tk := parseTask(t, `
agent: A
workspace: `+t.TempDir()+`
retry: {maxRetries: 1, base: 1s}
agents:
  A:
    driver: script
    tools: [read_file]
    script:
      plan:
        - {id: a, description: a, agent: A}
        - {id: b, description: b, agent: A, dependsOn: [a]}
        - {id: c, description: c, agent: A, dependsOn: [b]}
        - {id: d, description: d, agent: A}
      steps:
        a:
          - {fail: transient, message: still down, times: 5}
        b:
          - {tool: write_file, args: {path: x, content: y}}
        "*":
          - {output: ok}
`)
	out, err := e.m.Dispatch(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != statefmt.StatusFailed || !strings.Contains(out.Reason, "step a failed: still down (after 2 attempts)") || !strings.Contains(out.Reason, "blocked: b, c") {
		t.Fatalf("output %+v", out)
	}
	failed := e.rec.of(event.StepFailed)
	if len(failed) != 1 || failed[0].StepID != "a" || !reflect.DeepEqual(failed[0].Blocked, []string{"b", "c"}) {
		t.Fatalf("step_failed events %+v", failed)
	}
	if retries := e.rec.of(event.StepRetry); len(retries) != 1 || retries[0].DelayMs < 1000 || retries[0].DelayMs > 1200 {
		t.Fatalf("retry events %+v (want one, 1s plus at most 20%% jitter)", retries)
	}
	st := out.Steps
	if st[3].Status != statefmt.StepCompleted || st[1].Status != statefmt.StepBlocked || st[0].Attempts != 2 {
		t.Fatalf("steps %+v", st)
	}
}

func TestToolOutsideThePermittedSetIsRefusedAndRecorded(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	out, err := e.m.Dispatch(context.Background(), parseTask(t, `
agent: A
workspace: `+ws+`
agents:
  A:
    driver: script
    tools: [read_file]
    script:
      plan: [{id: a, description: a, agent: A}]
      steps:
        a: [{tool: write_file, args: {path: x, content: y}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != statefmt.StatusFailed || !strings.Contains(out.Reason, "agent A may not call write_file") {
		t.Fatalf("output %+v", out)
	}
	if _, err := os.Stat(filepath.Join(ws, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused tool ran: %v", err)
	}
	h, _ := e.m.Get(out.HarnessID)
	hist := h.State().ToolCallHistory
	if len(hist) != 1 || hist[0].Result.ErrorKind != "permission" {
		t.Fatalf("history %+v", hist)
	}
	calls := e.rec.of(event.ToolCall)
	if len(calls) != 1 || *calls[0].Success {
		t.Fatalf("tool_call events %+v", calls)
	}
}

// Resume: a run interrupted at a random step pauses with its state persisted;
// a new process (reopened store) resumes a state equal to it (timestamps aside), and finishes
// in the same final state as an uninterrupted run. A run killed without pausing (the harness
// left running in the store) resumes the same way. Two more properties ride along: a finished
// plan completes the harness with plan_completed, and every event has its fields and is in the
// durable log exactly as the live sinks saw it.
func TestPropertyInterruptResumeMatchesUninterrupted(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("pause/resume and crash/resume reach the uninterrupted final state", prop.ForAll(func(seed uint64, crash bool) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 1))
			src := randomTask(r, "x", "WS", r.IntN(4) == 0, true)
			// Uninterrupted.
			ref := newEnv(t)
			defer ref.close()
			tk := parseTask(t, strings.ReplaceAll(src, "WS", t.TempDir()))
			want, err := ref.m.Dispatch(context.Background(), tk)
			if err != nil {
				return err.Error()
			}
			refH, _ := ref.m.Get("x")
			if msg := checkEvents(ref); msg != "" {
				return msg
			}
			if want.Status == statefmt.StatusCompleted && len(ref.rec.of(event.PlanCompleted)) != 1 {
				return "completed without plan_completed"
			}
			// Interrupted at a random step start, then resumed (possibly several times).
			e := newEnv(t)
			defer e.close()
			tk = parseTask(t, strings.ReplaceAll(src, "WS", t.TempDir()))
			h, err := e.m.Create(tk)
			if err != nil {
				return err.Error()
			}
			for round := 0; ; round++ {
				ctx, cancel := context.WithCancel(context.Background())
				stopAt := 1 + r.IntN(4)
				seen := 0
				e.rec.hook = func(ev event.Event) {
					if ev.Type == event.StepStarted {
						if seen++; seen == stopAt && round < 3 {
							cancel()
						}
					}
				}
				err := h.Run(ctx)
				cancel()
				e.rec.hook = nil
				if err == nil {
					break
				}
				if !errors.Is(err, harness.ErrPaused) {
					return err.Error()
				}
				paused := h.State()
				if paused.Status != statefmt.StatusPaused {
					return "interrupted run is " + string(paused.Status)
				}
				if crash {
					// As if the process died: put the stored status back to running.
					paused.Status, paused.StatusReason = statefmt.StatusRunning, ""
					if _, err := e.store.Persist(paused); err != nil {
						return err.Error()
					}
				}
				e.open()
				if h, err = e.m.ResumeFromCheckpoint("x"); err != nil {
					return err.Error()
				}
				if got := h.State(); !reflect.DeepEqual(comparable(got), comparable(paused)) {
					return "the resumed state differs from the paused one"
				}
			}
			if got := comparable(h.State()); !reflect.DeepEqual(got, comparable(refH.State())) {
				a, _ := statefmt.EncodeJSON(got)
				b, _ := statefmt.EncodeJSON(comparable(refH.State()))
				return fmt.Sprintf("final states differ:\n%s\n%s", a, b)
			}
			return checkEvents(e)
		})
	}, gen.UInt64(), gen.Bool()))
	p.TestingRun(t)
}

// CheckEvents: every event has its common and type-specific fields, and the durable log of
// each harness holds what the live sink saw, in order.
func checkEvents(e *env) string {
	byHarness := map[string][]event.Event{}
	for _, ev := range e.rec.events {
		if ev.HarnessID == "" || ev.Time.IsZero() || ev.N == 0 {
			return fmt.Sprintf("event without harness id, time or number: %+v", ev)
		}
		var missing bool
		switch ev.Type {
		case event.StateTransition:
			missing = ev.To == ""
		case event.StepStarted, event.StepCompleted, event.StepRetry:
			missing = ev.StepID == "" || ev.Attempt == 0
		case event.StepFailed:
			missing = ev.StepID == "" || ev.Message == ""
		case event.ToolCall:
			missing = ev.Tool == "" || ev.Success == nil
		case event.Checkpoint:
			missing = ev.Seq == 0 || ev.Kind == "" || ev.StoredBytes == 0
		case event.PlanCompleted:
			missing = ev.Steps == 0
		case event.Warning:
			missing = ev.Message == ""
		case event.Gate:
			missing = ev.GateID == "" || ev.StepID == "" || ev.Action == "" || ev.Kind == ""
		case event.SubAgent:
			missing = ev.SubAgentID == "" || ev.StepID == "" || ev.Outcome == ""
		case event.SideEffect:
			missing = ev.Tool == "" || ev.StepID == "" || ev.Action == ""
		case event.Iteration:
			missing = ev.StepID == "" || ev.Iteration == 0 || ev.Outcome == ""
		case event.Compaction:
			missing = ev.StepID == "" || ev.Outcome == "" || ev.Message == ""
		default:
			return "unknown event type " + string(ev.Type)
		}
		if missing {
			return fmt.Sprintf("%s event without its fields: %+v", ev.Type, ev)
		}
		byHarness[ev.HarnessID] = append(byHarness[ev.HarnessID], ev)
	}
	for id, live := range byHarness {
		var stored []event.Event
		err := e.store.Events(id, 0, func(ev event.Event) bool {
			stored = append(stored, ev)
			return true
		})
		if err != nil {
			return err.Error()
		}
		// Events of attempts cut short were never persisted, nor shown.
		a, _ := json.Marshal(live)
		b, _ := json.Marshal(stored)
		if string(a) != string(b) {
			return fmt.Sprintf("durable log of %s differs from the live events:\n%s\n%s", id, b, a)
		}
	}
	return ""
}

// Every created harness has a unique id, its agent, status created, and is listed.
func TestPropertyCreation(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("creation invariants", prop.ForAll(func(agents []int) bool {
		return proptest.Report(t, func() string {
			e := newEnv(t)
			defer e.close()
			e.m = harness.NewManager(e.store, harness.Options{Clock: e.clock}) // real id source
			ids := map[string]bool{}
			for _, a := range agents {
				name := fmt.Sprintf("AGENT%d", a)
				tk := parseTask(t, fmt.Sprintf("agent: %s\nagents:\n  %s: {driver: script, script: {}}\n", name, name))
				h, err := e.m.Create(tk)
				if err != nil {
					return err.Error()
				}
				st := h.State()
				if ids[h.ID()] || st.AgentName != name || st.Status != statefmt.StatusCreated {
					return fmt.Sprintf("harness %s: duplicate id, or agent %s status %s", h.ID(), st.AgentName, st.Status)
				}
				ids[h.ID()] = true
			}
			list, err := e.m.List()
			if err != nil {
				return err.Error()
			}
			for _, l := range list {
				if !ids[l.ID] || l.Status != statefmt.StatusCreated {
					return "listing has " + l.ID + " " + string(l.Status)
				}
				delete(ids, l.ID)
			}
			if len(ids) != 0 {
				return fmt.Sprintf("%d created harnesses are not listed", len(ids))
			}
			return ""
		})
	}, gen.SliceOfN(8, gen.IntRange(0, 3))))
	p.TestingRun(t)
}

// A long-running task runs in a harness (the store holds it), any other on the
// direct path (the store holds nothing); both report the same steps, output, status and reason
// (a failed plan's failed steps with their errors, and the steps they blocked).
func TestPropertyDispatchPaths(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("long-running tasks get a harness, others the direct path", prop.ForAll(func(seed uint64) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 3))
			src := randomTask(r, "d", "WS", false, false) // the direct path does not retry
			e := newEnv(t)
			defer e.close()
			harness, err := e.m.Dispatch(context.Background(), parseTask(t, strings.ReplaceAll(src, "WS", t.TempDir())))
			if err != nil {
				return err.Error()
			}
			direct, err := e.m.Dispatch(context.Background(), parseTask(t, "longRunning: false\n"+strings.Replace(strings.ReplaceAll(src, "WS", t.TempDir()), "id: d", "id: d2", 1)))
			if err != nil {
				return err.Error()
			}
			list, _ := e.m.List()
			if harness.Path != "harness" || direct.Path != "direct" || direct.HarnessID != "" || len(list) != 1 || list[0].ID != "d" {
				return fmt.Sprintf("paths %s/%s, %d harnesses stored", harness.Path, direct.Path, len(list))
			}
			if !reflect.DeepEqual(harness.Steps, direct.Steps) || harness.Output != direct.Output || harness.Status != direct.Status ||
				harness.Reason != direct.Reason {
				return fmt.Sprintf("outputs differ:\n%+v\n%+v", harness, direct)
			}
			return ""
		})
	}, gen.UInt64()))
	p.TestingRun(t)
}

func TestStopAndRefusedTransitionsChangeNothingElse(t *testing.T) {
	e := newEnv(t)
	tk := parseTask(t, "agent: A\nagents:\n  A: {driver: script, script: {plan: [{id: a, description: a, agent: A}], steps: {a: [{output: x}]}}}\n")
	h, err := e.m.Create(tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Stop(h.ID()); err != nil {
		t.Fatal(err)
	}
	if st := h.State(); st.Status != statefmt.StatusFailed || st.StatusReason != "stopped by request" {
		t.Fatalf("after stop: %s (%s)", st.Status, st.StatusReason)
	}
	before := h.State()
	err = e.m.Stop(h.ID())
	var te *harness.TransitionError
	if !errors.As(err, &te) || te.From != statefmt.StatusFailed {
		t.Fatalf("second stop: %v", err)
	}
	if err := h.Run(context.Background()); !errors.As(err, &te) {
		t.Fatalf("running a failed harness: %v", err)
	}
	e.open()
	again, _ := e.m.Get(h.ID())
	if !reflect.DeepEqual(comparable(again.State()), comparable(before)) || again.State().CheckpointCount != before.CheckpointCount {
		t.Fatal("refused operations changed the stored state")
	}
}

// A harness the store already holds (here imported as a bare state, without a task) is never
// overwritten by Create.
func TestCreateRefusesAnIDTheStoreHolds(t *testing.T) {
	e := newEnv(t)
	st := &statefmt.HarnessState{SchemaVersion: statefmt.SchemaVersion, HarnessID: "taken", AgentName: "A", Status: statefmt.StatusPaused}
	if _, err := e.store.ImportState(st, false); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.Create(parseTask(t, "id: taken\nagent: A\nagents:\n  A: {driver: script, script: {}}\n"))
	if !errors.Is(err, harness.ErrExists) {
		t.Fatalf("create over an imported harness: %v", err)
	}
	if got, err := e.store.Restore("taken"); err != nil || got.Status != statefmt.StatusPaused {
		t.Fatalf("the imported harness changed: %v", err)
	}
}

// A harness records its tool calls' times and durations, and its checkpoints' times, at
// statefmt.Precision: the nanoseconds below a microsecond are a clock's noise, and each cost a
// stored harness bytes.
func TestTimesAreRecordedToTheMicrosecond(t *testing.T) {
	e := newEnv(t)
	e.clock.Advance(123456789 * time.Nanosecond) // a clock that reads nanoseconds
	ws := t.TempDir()
	tk := parseTask(t, `
id: t1
agent: A
workspace: `+ws+`
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      plan:
        - {id: write, description: write, agent: A}
      steps:
        write:
          - {tool: write_file, args: {path: a.txt, content: "one\n"}}
          - {output: written}
`)
	if out, err := e.m.Dispatch(context.Background(), tk); err != nil || out.Status != statefmt.StatusCompleted {
		t.Fatalf("%+v %v", out, err)
	}
	h, err := e.m.Get("t1")
	if err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if len(st.ToolCallHistory) == 0 || st.LastCheckpointAt == nil {
		t.Fatalf("%d tool calls, last checkpoint %v", len(st.ToolCallHistory), st.LastCheckpointAt)
	}
	at := func(what string, tm time.Time) {
		if tm.IsZero() || tm.Nanosecond()%1000 != 0 {
			t.Fatalf("%s %v is not to the microsecond", what, tm.Format(time.RFC3339Nano))
		}
	}
	for _, r := range st.ToolCallHistory {
		at(r.CallName+"'s time", r.Timestamp)
		if r.Duration < time.Microsecond || r.Duration%time.Microsecond != 0 {
			t.Fatalf("%s took %v: not whole microseconds, or none", r.CallName, r.Duration)
		}
	}
	at("the last checkpoint's time", *st.LastCheckpointAt)
	at("updatedAt", st.UpdatedAt)
}

// Counts of one in a failure's words are singular: "after 1 attempt", "a budget of 1 tool call".
func TestAFailureCountsOneInTheSingular(t *testing.T) {
	e := newEnv(t)
	tk := parseTask(t, `
id: one1
agent: A
workspace: `+t.TempDir()+`
retry: {maxRetries: 0, base: 1s}
budget: {toolCalls: 1}
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      plan:
        - {id: a, description: a, agent: A}
        - {id: b, description: b, agent: A}
      steps:
        a:
          - {fail: transient, message: upstream flaked, times: 5}
        b:
          - {tool: write_file, args: {path: x, content: y}}
          - {tool: write_file, args: {path: z, content: y}}
`)
	out, _ := e.m.Dispatch(context.Background(), tk) // paused or failed: the words are the test
	h, err := e.m.Get("one1")
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, s := range h.State().Plan.Steps {
		if s.Error != nil {
			words = append(words, *s.Error)
		}
	}
	all := strings.Join(append(words, out.Reason, h.State().StatusReason), "\n")
	if !strings.Contains(all, "upstream flaked (after 1 attempt)") || !strings.Contains(all, "budget of 1 tool call") ||
		strings.Contains(all, "1 attempts") || strings.Contains(all, "1 tool calls") {
		t.Fatalf("a failure's words:\n%s", all)
	}
}
