package harness_test

// Correctness properties of tool calls, gates and sub-agents, each over at least 100 generated cases, through real harnesses on a real store, with the fake clock
// so that backoff is observed without sleeping.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"testing"

	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// ToolCallArgs are arguments that make each tool succeed in a workspace holding seed.txt; i
// makes the call's effect (a file) unique.
func toolCallArgs(tool string, i int) string {
	switch tool {
	case "read_file":
		return "{path: seed.txt}"
	case "write_file":
		return fmt.Sprintf("{path: w%d.txt, content: \"call %d\"}", i, i)
	case "edit_file":
		return "{path: seed.txt, old: seed, new: seed}"
	case "glob":
		return "{pattern: \"*.txt\"}"
	case "grep":
		return "{pattern: seed}"
	default: // bash
		return fmt.Sprintf("{command: \"touch b%d.txt\"}", i)
	}
}

var allTools = []string{"read_file", "write_file", "edit_file", "glob", "grep", "bash"}

// Workspace makes a workspace holding seed.txt.
func workspace(t *testing.T) string {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "seed.txt"), []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// A call outside the agent's permitted tools is rejected without running (its effect
// never happens), recorded and evented; a permitted one runs.
func TestPropertyCallsOutsidePermittedToolsAreRefused(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("calls outside the permitted set are refused unexecuted", prop.ForAll(func(seed uint64) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 6))
			var permitted []string
			for _, tool := range allTools {
				if r.IntN(2) == 0 {
					permitted = append(permitted, tool)
				}
			}
			var calls []string
			var actions strings.Builder
			for i := range 1 + r.IntN(5) {
				tool := allTools[r.IntN(len(allTools))]
				calls = append(calls, tool)
				fmt.Fprintf(&actions, "        - {tool: %s, args: %s}\n", tool, toolCallArgs(tool, i))
			}
			ws := workspace(t)
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, fmt.Sprintf("id: p6\nagent: A\nautonomy: 5\nworkspace: %s\nagents:\n  A:\n    driver: script\n    tools: [%s]\n    script:\n      plan: [{id: s, description: calls, agent: A}]\n      steps:\n        s:\n%s",
				ws, strings.Join(permitted, ", "), actions.String())))
			if err != nil {
				return err.Error()
			}
			if err := h.Run(context.Background()); err != nil {
				return err.Error()
			}
			st := h.State()
			executed := 0
			for i, tool := range calls {
				allowed := slices.Contains(permitted, tool)
				if i >= len(st.ToolCallHistory) {
					return fmt.Sprintf("call %d (%s) is not recorded", i, tool)
				}
				rec := st.ToolCallHistory[i]
				ran := exists(filepath.Join(ws, fmt.Sprintf("w%d.txt", i))) || exists(filepath.Join(ws, fmt.Sprintf("b%d.txt", i)))
				if rec.CallName != tool {
					return fmt.Sprintf("record %d is %s, want %s", i, rec.CallName, tool)
				}
				if !allowed {
					if rec.Result.ErrorKind != "permission" || ran {
						return fmt.Sprintf("refused call %s: record %+v, ran %v", tool, rec.Result, ran)
					}
					if len(st.ToolCallHistory) != i+1 || st.Status != statefmt.StatusFailed {
						return "the step went on after a refused call"
					}
					break
				}
				if !rec.Result.Success || (tool == "write_file" || tool == "bash") && !ran {
					return fmt.Sprintf("permitted call %s did not run: %+v", tool, rec.Result)
				}
				executed++
			}
			if st.TotalToolCalls != executed || len(e.rec.of(event.ToolCall)) != len(st.ToolCallHistory) {
				return fmt.Sprintf("%d calls counted, %d ran; %d events for %d records", st.TotalToolCalls, executed, len(e.rec.of(event.ToolCall)), len(st.ToolCallHistory))
			}
			return checkEvents(e)
		})
	}, gen.UInt64()))
	p.TestingRun(t)
}

// Every successful call is recorded with its name, arguments, result and a positive
// duration, and evented with tool, duration, success and harness id.
func TestPropertyEveryCallIsRecordedAndEvented(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("successful calls are recorded whole", prop.ForAll(func(seed uint64) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 7))
			var calls []string
			var plan, steps strings.Builder
			n := 1 + r.IntN(3)
			k := 0
			for s := range n {
				fmt.Fprintf(&plan, "        - {id: s%d, description: step %d, agent: A}\n", s, s)
				fmt.Fprintf(&steps, "        s%d:\n", s)
				for range r.IntN(4) {
					tool := allTools[r.IntN(len(allTools))]
					calls = append(calls, tool)
					fmt.Fprintf(&steps, "          - {tool: %s, args: %s}\n", tool, toolCallArgs(tool, k))
					k++
				}
				fmt.Fprintf(&steps, "          - {output: done}\n")
			}
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, fmt.Sprintf("id: p7\nagent: A\nautonomy: 5\nworkspace: %s\nagents:\n  A:\n    driver: script\n    tools: [%s]\n    script:\n      plan:\n%s      steps:\n%s",
				workspace(t), strings.Join(allTools, ", "), plan.String(), steps.String())))
			if err != nil {
				return err.Error()
			}
			if err := h.Run(context.Background()); err != nil {
				return err.Error()
			}
			e.open() // what the store holds, not what is in memory
			got, err := e.m.Get("p7")
			if err != nil {
				return err.Error()
			}
			st := got.State()
			if st.Status != statefmt.StatusCompleted || len(st.ToolCallHistory) != len(calls) || st.TotalToolCalls != len(calls) {
				return fmt.Sprintf("status %s, %d records for %d calls", st.Status, len(st.ToolCallHistory), len(calls))
			}
			events := e.rec.of(event.ToolCall)
			for i, rec := range st.ToolCallHistory {
				var args map[string]any
				if rec.CallName != calls[i] || json.Unmarshal(rec.Arguments, &args) != nil || len(args) == 0 || !rec.Result.Success ||
					rec.Duration <= 0 || rec.Timestamp.IsZero() {
					return fmt.Sprintf("record %d incomplete: %+v", i, rec)
				}
				ev := events[i]
				if ev.Tool != calls[i] || ev.DurationMs <= 0 || ev.Success == nil || !*ev.Success || ev.HarnessID != "p7" {
					return fmt.Sprintf("event %d incomplete: %+v", i, ev)
				}
			}
			return checkEvents(e)
		})
	}, gen.UInt64()))
	p.TestingRun(t)
}

// A call failing transiently is retried up to the configured maximum, each wait at
// least double the one before (the fake clock records the waits); success ends the retries.
func TestPropertyTransientFailuresRetryWithGrowingBackoff(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("transient failures retry with exponential backoff", prop.ForAll(func(fails, maxRetries int, baseMs int, factor float64) bool {
		return proptest.Report(t, func() string {
			ws := workspace(t)
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, fmt.Sprintf(`id: p8
agent: A
autonomy: 5
workspace: %s
retry: {maxRetries: %d, base: %dms, factor: %g}
agents:
  A:
    driver: script
    tools: [flaky]
    script:
      plan: [{id: s, description: flaky call, agent: A}]
      steps:
        s: [{tool: flaky, args: {}}]
tools:
  flaky: {command: [sh, -c, 'n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ $n -ge %d ] || { echo busy >&2; exit 75; }; echo ok']}
`, ws, maxRetries, baseMs, factor, fails)))
			if err != nil {
				return err.Error()
			}
			e.clock.Sleeps()
			if err := h.Run(context.Background()); err != nil {
				return err.Error()
			}
			st := h.State()
			sleeps := e.clock.Sleeps()
			runs, _ := os.ReadFile(filepath.Join(ws, "count"))
			retries := min(fails, maxRetries)
			rec := st.ToolCallHistory[0]
			if string(runs) != fmt.Sprintf("%d\n", retries+1) || rec.RetryCount != retries || len(sleeps) != retries || len(st.ToolCallHistory) != 1 {
				return fmt.Sprintf("%d fails, max %d: ran %q times, retryCount %d, %d waits", fails, maxRetries, runs, rec.RetryCount, len(sleeps))
			}
			if want := fails <= maxRetries; rec.Result.Success != want || (st.Status == statefmt.StatusCompleted) != want {
				return fmt.Sprintf("success %v, status %s", rec.Result.Success, st.Status)
			}
			base := time.Duration(baseMs) * time.Millisecond
			for i, d := range sleeps {
				if i == 0 && (d < base || d > base*12/10) || i > 0 && float64(d) < factor*float64(sleeps[i-1]) {
					return fmt.Sprintf("waits %v do not grow by %g from %v", sleeps, factor, base)
				}
			}
			return ""
		})
	}, gen.IntRange(0, 5), gen.IntRange(0, 4), gen.IntRange(10, 2000), gen.Float64Range(2, 3)))
	p.TestingRun(t)
}

// After N executed calls every further call is refused with a budget error. At
// autonomy 4-5 the harness then fails; at 3 a human decides (each approval extends the budget
// by N), and the task ends having run exactly its calls.
func TestPropertyToolCallBudgetIsEnforced(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("the tool-call budget holds", prop.ForAll(func(limit, calls, autonomy int) bool {
		return proptest.Report(t, func() string {
			var actions strings.Builder
			for i := range calls {
				fmt.Fprintf(&actions, "          - {tool: write_file, args: {path: f%d.txt, content: x}}\n", i)
			}
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, fmt.Sprintf("id: p9\nagent: A\nautonomy: %d\nbudget: {toolCalls: %d}\nworkspace: %s\nagents:\n  A:\n    driver: script\n    tools: [write_file]\n    script:\n      plan: [{id: s, description: calls, agent: A}]\n      steps:\n        s:\n%s          - {output: done}\n",
				autonomy, limit, workspace(t), actions.String())))
			if err != nil {
				return err.Error()
			}
			gates := 0
			for {
				err := h.Run(context.Background())
				if err == nil {
					break
				}
				if !errors.Is(err, harness.ErrWaiting) || autonomy >= 4 {
					return "run: " + err.Error()
				}
				st := h.State()
				g := st.Gates[len(st.Gates)-1]
				if g.Kind != "budget:toolCalls" || g.Status != statefmt.GatePending || st.Status != statefmt.StatusPaused {
					return fmt.Sprintf("waiting on %+v, status %s", g, st.Status)
				}
				gates++
				if _, err := e.m.Decide("p9", "", true, ""); err != nil {
					return err.Error()
				}
			}
			st := h.State()
			switch {
			case calls <= limit:
				if st.Status != statefmt.StatusCompleted || st.TotalToolCalls != calls || gates != 0 {
					return fmt.Sprintf("within budget: %s after %d calls, %d gates", st.Status, st.TotalToolCalls, gates)
				}
			case autonomy >= 4:
				hist := st.ToolCallHistory
				if st.Status != statefmt.StatusFailed || !strings.Contains(st.StatusReason, "budget") || st.TotalToolCalls != limit ||
					len(hist) != limit+1 || hist[limit].Result.ErrorKind != "budget" {
					return fmt.Sprintf("over budget at autonomy %d: %s (%s), %d calls ran, %d recorded", autonomy, st.Status, st.StatusReason, st.TotalToolCalls, len(hist))
				}
				for i := limit; i < calls; i++ {
					if exists(filepath.Join(h.Task().Workspace.Path, fmt.Sprintf("f%d.txt", i))) {
						return fmt.Sprintf("call %d ran past the budget", i)
					}
				}
			default:
				if want := (calls+limit-1)/limit - 1; st.Status != statefmt.StatusCompleted || st.TotalToolCalls != calls || gates != want {
					return fmt.Sprintf("over budget at autonomy 3: %s after %d calls, %d gates (want %d)", st.Status, st.TotalToolCalls, gates, want)
				}
			}
			return checkEvents(e)
		})
	}, gen.IntRange(1, 6), gen.IntRange(0, 12), gen.IntRange(3, 5)))
	p.TestingRun(t)
}

// RandomGatedPlan is a random DAG of script steps with random criticality.
func randomGatedPlan(r *rand.Rand, id string, autonomy int, ws string) (src string, critical map[string]bool) {
	n := 1 + r.IntN(6)
	critical = map[string]bool{}
	var plan, steps strings.Builder
	for i := range n {
		var deps []string
		for j := range i {
			if r.IntN(3) == 0 {
				deps = append(deps, fmt.Sprintf("s%d", j))
			}
		}
		c := r.IntN(3) == 0
		critical[fmt.Sprintf("s%d", i)] = c
		fmt.Fprintf(&plan, "        - {id: s%d, description: step %d, agent: A, critical: %v, dependsOn: [%s]}\n", i, i, c, strings.Join(deps, ", "))
		fmt.Fprintf(&steps, "        s%d: [{tool: write_file, args: {path: s%d.txt, content: x}}, {output: \"s%d done\"}]\n", i, i, i)
	}
	return fmt.Sprintf("id: %s\nagent: A\nautonomy: %d\nworkspace: %s\nagents:\n  A:\n    driver: script\n    tools: [write_file]\n    script:\n      plan:\n%s      steps:\n%s",
		id, autonomy, ws, plan.String(), steps.String()), critical
}

// Gates are placed by the autonomy rule: 1-2 before every step, 3 before critical
// steps, 4-5 nowhere; each gated step waits for its approval before it starts.
func TestPropertyGatesArePlacedByAutonomy(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("gates follow the autonomy level", prop.ForAll(func(seed uint64, autonomy int) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 10))
			src, critical := randomGatedPlan(r, "p10", autonomy, t.TempDir())
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, src))
			if err != nil {
				return err.Error()
			}
			var gated []string
			for {
				err := h.Run(context.Background())
				if err == nil {
					break
				}
				if !errors.Is(err, harness.ErrWaiting) {
					return err.Error()
				}
				d, err := e.m.Decide("p10", "", true, "")
				if err != nil {
					return err.Error()
				}
				if d.Gate.Kind != harness.GateStep || slices.Contains(gated, d.Gate.StepID) {
					return fmt.Sprintf("gate %+v (gated so far: %v)", d.Gate, gated)
				}
				gated = append(gated, d.Gate.StepID)
			}
			var want []string
			for id, c := range critical { // the seed's rule, written out
				if autonomy <= 2 || autonomy == 3 && c {
					want = append(want, id)
				}
			}
			slices.Sort(want)
			got := slices.Sorted(slices.Values(gated))
			if !slices.Equal(got, want) || h.Status() != statefmt.StatusCompleted {
				return fmt.Sprintf("autonomy %d: gated %v, want %v (status %s)", autonomy, got, want, h.Status())
			}
			// A gated step starts only after its gate was approved.
			approved := map[string]bool{}
			for _, ev := range e.rec.events {
				switch {
				case ev.Type == event.Gate && ev.Action == "approved":
					approved[ev.StepID] = true
				case ev.Type == event.StepStarted && slices.Contains(want, ev.StepID) && !approved[ev.StepID]:
					return "step " + ev.StepID + " started before its gate was approved"
				}
			}
			if n := len(e.rec.of(event.Gate)); n != 2*len(want) {
				return fmt.Sprintf("%d gate events for %d gates", n, len(want))
			}
			return checkEvents(e)
		})
	}, gen.UInt64(), gen.IntRange(1, 5)))
	p.TestingRun(t)
}

// At a gate the harness persists its state (paused, the gate pending), emits
// waiting_for_human and suspends; approving lets it go on, rejecting records the reason and
// leaves it paused. Decisions survive a restart.
func TestPropertyGatesSuspendPersistAndSurviveRestarts(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("gates suspend, approve resumes, reject pauses with the reason", prop.ForAll(func(seed uint64, approve bool) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 11))
			src, _ := randomGatedPlan(r, "p11", 2, t.TempDir())
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, src))
			if err != nil {
				return err.Error()
			}
			if err := h.Run(context.Background()); !errors.Is(err, harness.ErrWaiting) {
				return fmt.Sprintf("run: %v, want waiting", err)
			}
			waits := e.rec.of(event.Gate)
			if len(waits) != 1 || waits[0].Action != "waiting_for_human" || waits[0].GateID == "" || waits[0].StepID == "" {
				return fmt.Sprintf("gate events %+v", waits)
			}
			gateStep := waits[0].StepID
			e.open() // a restart: everything below comes from the store
			stored, err := e.store.Restore("p11")
			if err != nil {
				return err.Error()
			}
			if stored.Status != statefmt.StatusPaused || len(stored.Gates) != 1 || stored.Gates[0].Status != statefmt.GatePending ||
				stored.Gates[0].ID != waits[0].GateID || stored.Plan.Steps[stepIdx(stored, gateStep)].Status == statefmt.StepCompleted {
				return fmt.Sprintf("stored at the gate: %s %+v", stored.Status, stored.Gates)
			}
			h, err = e.m.ResumeFromCheckpoint("p11")
			if err != nil {
				return err.Error()
			}
			if err := h.Run(context.Background()); !errors.Is(err, harness.ErrWaiting) {
				return fmt.Sprintf("resumed before a decision: %v", err)
			}
			reason := fmt.Sprintf("not now %d", r.IntN(1000))
			if _, err := e.m.Decide("p11", waits[0].GateID, approve, reason); err != nil {
				return err.Error()
			}
			e.open()
			st, _ := e.store.Restore("p11")
			g := st.Gates[0]
			if approve {
				if g.Status != statefmt.GateApproved || g.ResolvedAt == nil {
					return fmt.Sprintf("approved gate stored as %+v", g)
				}
				h, _ = e.m.ResumeFromCheckpoint("p11")
				err := h.Run(context.Background())
				if err != nil && !errors.Is(err, harness.ErrWaiting) {
					return err.Error()
				}
				if s := h.State(); s.Plan.Steps[stepIdx(s, gateStep)].Status != statefmt.StepCompleted {
					return "the approved step did not run"
				}
				return checkEvents(e)
			}
			if g.Status != statefmt.GateRejected || g.Reason != reason || st.Status != statefmt.StatusPaused || !strings.Contains(st.StatusReason, reason) {
				return fmt.Sprintf("rejected gate stored as %+v, harness %s (%s)", g, st.Status, st.StatusReason)
			}
			// Resuming asks again; the rejected step has not run.
			h, _ = e.m.ResumeFromCheckpoint("p11")
			if err := h.Run(context.Background()); !errors.Is(err, harness.ErrWaiting) {
				return fmt.Sprintf("resume after a rejection: %v", err)
			}
			s := h.State()
			if last := s.Gates[len(s.Gates)-1]; last.StepID != gateStep || last.Status != statefmt.GatePending || s.Plan.Steps[stepIdx(s, gateStep)].Attempts != 0 {
				return fmt.Sprintf("after rejection and resume: gates %+v", s.Gates)
			}
			return ""
		})
	}, gen.UInt64(), gen.Bool()))
	p.TestingRun(t)
}

func stepIdx(st *statefmt.HarnessState, id string) int {
	for i, s := range st.Plan.Steps {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// DelegatingTask is a random plan over agents A (the owner), B and C; B and C fail their
// steps permanently on the first failB/failC attempts.
func delegatingTask(r *rand.Rand, id, ws string, failB int) (string, map[string]string) {
	n := 1 + r.IntN(6)
	agentOf := map[string]string{}
	var plan strings.Builder
	steps := map[string]*strings.Builder{"A": {}, "B": {}, "C": {}}
	for i := range n {
		var deps []string
		for j := range i {
			if r.IntN(3) == 0 {
				deps = append(deps, fmt.Sprintf("s%d", j))
			}
		}
		a := []string{"A", "B", "C"}[r.IntN(3)]
		sid := fmt.Sprintf("s%d", i)
		agentOf[sid] = a
		fmt.Fprintf(&plan, "  - {id: %s, description: step %d, agent: %s, dependsOn: [%s]}\n", sid, i, a, strings.Join(deps, ", "))
		fail := ""
		if a == "B" && failB > 0 {
			fail = fmt.Sprintf("{fail: permanent, message: \"B broke on %s\", times: %d}, ", sid, failB)
		}
		fmt.Fprintf(steps[a], "        %s: [%s{tool: write_file, args: {path: %s.txt, content: %s}}, {output: \"%s did %s\"}]\n", sid, fail, sid, a, a, sid)
	}
	var agents strings.Builder
	for _, a := range []string{"A", "B", "C"} {
		body := steps[a].String()
		if body == "" {
			body = "        none: [{output: x}]\n"
		}
		fmt.Fprintf(&agents, "  %s:\n    driver: script\n    tools: [write_file]\n    script:\n      steps:\n%s", a, body)
	}
	return fmt.Sprintf("id: %s\nagent: A\nautonomy: 4\nworkspace: %s\nagents:\n%splan:\n%s", id, ws, agents.String(), plan.String()), agentOf
}

// A step assigned to another agent runs in a child harness that the
// parent tracks (id, status) and that is persisted with its parent's id; the child's output
// becomes the step's output.
func TestPropertySubAgentsRunInPersistedChildHarnesses(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("sub-agents are spawned, tracked and their outputs incorporated", prop.ForAll(func(seed uint64) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 15))
			src, agentOf := delegatingTask(r, "p15", t.TempDir(), 0)
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, src))
			if err != nil {
				return err.Error()
			}
			if err := h.Run(context.Background()); err != nil {
				return err.Error()
			}
			// A child the parent took its result from leaves memory (it is read back from the
			// store when needed): a long plan's sub-agents do not pile up in a running process.
			for _, cid := range h.State().SubAgentIDs {
				if e.m.Loaded(cid) {
					return "sub-agent " + cid + " stays loaded after its parent took its result"
				}
			}
			e.open()
			st, err := e.store.Restore("p15")
			if err != nil {
				return err.Error()
			}
			if st.Status != statefmt.StatusCompleted {
				return fmt.Sprintf("parent %s (%s)", st.Status, st.StatusReason)
			}
			children := 0
			for _, s := range st.Plan.Steps {
				want := fmt.Sprintf("wrote 1 bytes to %s.txt\n%s did %s", s.ID, agentOf[s.ID], s.ID)
				if s.Output == nil || *s.Output != want {
					return fmt.Sprintf("step %s output %v, want %q", s.ID, s.Output, want)
				}
				if agentOf[s.ID] == "A" {
					if s.ChildHarnessID != "" {
						return "the owner's step " + s.ID + " ran in a child"
					}
					continue
				}
				children++
				cid := s.ChildHarnessID
				res, ok := st.SubAgentResults[cid]
				if cid == "" || !slices.Contains(st.SubAgentIDs, cid) || !ok || res.Status != statefmt.StatusCompleted || res.StepID != s.ID ||
					res.AgentName != agentOf[s.ID] || res.Output == nil || *res.Output != want {
					return fmt.Sprintf("step %s: child %q tracked as %+v", s.ID, cid, res)
				}
				child, err := e.store.Restore(cid)
				if err != nil {
					return err.Error()
				}
				if child.ParentHarnessID != "p15" || child.Depth != 1 || child.AgentName != agentOf[s.ID] || child.Status != statefmt.StatusCompleted {
					return fmt.Sprintf("child %s stored as parent %q depth %d agent %s %s", cid, child.ParentHarnessID, child.Depth, child.AgentName, child.Status)
				}
			}
			if len(st.SubAgentIDs) != children || len(e.rec.of(event.SubAgent)) != 2*children {
				return fmt.Sprintf("%d children tracked, %d delegated steps, %d sub_agent events", len(st.SubAgentIDs), children, len(e.rec.of(event.SubAgent)))
			}
			return checkEvents(e)
		})
	}, gen.UInt64()))
	p.TestingRun(t)
}

// A failed sub-agent is retried exactly once, with its error as context, before the
// step fails (and its dependents block).
func TestPropertyFailedSubAgentIsRetriedOnce(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("a failed child is retried once, then the step fails", prop.ForAll(func(seed uint64, failB int) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 17))
			src, agentOf := delegatingTask(r, "p17", t.TempDir(), failB)
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, src))
			if err != nil {
				return err.Error()
			}
			if err := h.Run(context.Background()); err != nil {
				return err.Error()
			}
			st := h.State()
			for _, s := range st.Plan.Steps {
				if agentOf[s.ID] != "B" || s.Status == statefmt.StepBlocked {
					continue
				}
				var tries []statefmt.SubAgentResult
				for _, id := range st.SubAgentIDs {
					if res := st.SubAgentResults[id]; res.StepID == s.ID {
						tries = append(tries, res)
					}
				}
				wantTries := min(failB+1, harness.ChildTries)
				if len(tries) != wantTries {
					return fmt.Sprintf("step %s had %d children after %d failures, want %d", s.ID, len(tries), failB, wantTries)
				}
				if failB >= 1 {
					if tries[0].Status != statefmt.StatusFailed {
						return "the first child did not fail"
					}
					retry, err := e.m.Get(tries[1].HarnessID)
					if err != nil {
						return err.Error()
					}
					if !strings.Contains(retry.Task().Prompt, "A previous attempt at this failed") || !strings.Contains(retry.Task().Prompt, "B broke on "+s.ID) {
						return "the retry's prompt lacks the error: " + retry.Task().Prompt
					}
				}
				switch {
				case failB >= 2 && (s.Status != statefmt.StepFailed || tries[1].Status != statefmt.StatusFailed || !strings.Contains(*s.Error, "after a retry")):
					return fmt.Sprintf("step %s after two failed children: %s", s.ID, s.Status)
				case failB < 2 && (s.Status != statefmt.StepCompleted || tries[len(tries)-1].Status != statefmt.StatusCompleted):
					return fmt.Sprintf("step %s after %d failures: %s", s.ID, failB, s.Status)
				}
			}
			if failB >= 2 {
				for _, s := range st.Plan.Steps {
					for _, d := range s.Dependencies {
						if agentOf[d] == "B" && s.Status != statefmt.StepBlocked {
							return fmt.Sprintf("step %s depends on failed %s but is %s", s.ID, d, s.Status)
						}
					}
				}
			}
			return checkEvents(e)
		})
	}, gen.UInt64(), gen.IntRange(0, 3)))
	p.TestingRun(t)
}

// Sub-agents nest at most maxDepth deep. A chain of script agents, each delegating
// to the next, is refused at creation (nothing stored) when it is deeper; otherwise it runs, and
// its deepest child is at exactly its depth.
func TestPropertySubAgentDepthIsLimited(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("nesting deeper than maxDepth is refused before anything runs", prop.ForAll(func(chain, maxDepth int) bool {
		return proptest.Report(t, func() string {
			var agents strings.Builder
			for i := 0; i <= chain; i++ {
				fmt.Fprintf(&agents, "  L%d:\n    driver: script\n    tools: [write_file]\n    script:\n      plan:\n        - {id: own%d, description: level %d work, agent: L%d}\n", i, i, i, i)
				if i < chain {
					fmt.Fprintf(&agents, "        - {id: down%d, description: delegate, agent: L%d, dependsOn: [own%d]}\n", i, i+1, i)
				}
				fmt.Fprintf(&agents, "      steps:\n        own%d: [{tool: write_file, args: {path: l%d.txt, content: x}}, {output: level %d}]\n", i, i, i)
			}
			e := newEnv(t)
			defer e.close()
			h, err := e.m.Create(parseTask(t, fmt.Sprintf("id: p18\nagent: L0\nautonomy: 5\nmaxDepth: %d\nworkspace: %s\nagents:\n%s", maxDepth, t.TempDir(), agents.String())))
			if chain > maxDepth {
				list, _ := e.m.List()
				if err == nil || !strings.Contains(err.Error(), "maxDepth") || len(list) != 0 {
					return fmt.Sprintf("chain %d, max %d: create %v, %d harnesses stored", chain, maxDepth, err, len(list))
				}
				return ""
			}
			if err != nil {
				return err.Error()
			}
			if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
				return fmt.Sprintf("run: %v %s (%s)", err, h.Status(), h.State().StatusReason)
			}
			list, _ := e.m.List()
			deepest, parent := 0, map[string]string{}
			for _, l := range list {
				st, _ := e.store.Restore(l.ID)
				deepest = max(deepest, st.Depth)
				parent[l.ID] = st.ParentHarnessID
			}
			if deepest != chain || len(list) != chain+1 {
				return fmt.Sprintf("chain %d: %d harnesses, deepest at %d", chain, len(list), deepest)
			}
			for id, p := range parent {
				if id != "p18" && (p == "" || !strings.HasPrefix(id, p+".")) {
					return fmt.Sprintf("harness %s has parent %q", id, p)
				}
			}
			return checkEvents(e)
		})
	}, gen.IntRange(1, 5), gen.IntRange(1, 4)))
	p.TestingRun(t)
}
