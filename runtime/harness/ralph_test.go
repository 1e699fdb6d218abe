package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/proctest"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// FakeAgent is the stand-in CLI agent of the examples (examples/agents/fake-agent.sh).
var fakeAgent, _ = filepath.Abs("../../examples/agents/fake-agent.sh")

// CommandTask is a one-step task run by a command agent; extra is added to the agent's settings.
func commandTask(ws string, command, extra string) string {
	return fmt.Sprintf(`id: ralph
prompt: write three parts
agent: R
autonomy: 4
workspace: %s
agents:
  R:
    driver: command
    command: %s
    completionPromise: PARTS_DONE
%s
plan: [{id: write, description: write the parts, agent: R}]
`, ws, command, extra)
}

// outcomes lists how the iterations ended (and the breaker's closing), each checked to have
// been announced by a started event.
func outcomes(rec *recorder) []string {
	var out []string
	started := 0
	for _, e := range rec.of(event.Iteration) {
		switch {
		case e.Outcome == event.IterStarted:
			started = e.Iteration
			continue
		case e.Outcome != event.IterBreakerDone && e.Iteration != started:
			out = append(out, fmt.Sprintf("%d:%s(not started)", e.Iteration, e.Outcome))
			continue
		}
		out = append(out, fmt.Sprintf("%d:%s", e.Iteration, e.Outcome))
	}
	return out
}

// The Ralph loop end to end with a real script standing in for a CLI agent: fresh process per
// iteration, handoff state and feedback carried into the next prompt, a rate limit that waits
// (for the reset time the message states) without counting, an echoed prompt whose promise does
// not count, and the promise kept on the third iteration.
func TestRalphLoopWithAStandInCLIAgent(t *testing.T) {
	for _, mode := range []string{"text", "json"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			ws := filepath.Join(e.dir, "ws")
			cmd := fmt.Sprintf("[sh, %s]", fakeAgent)
			if mode == "json" {
				cmd = fmt.Sprintf("[sh, %s, --json]", fakeAgent)
			}
			h, err := e.m.Create(parseTask(t, commandTask(ws, cmd, "")))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := h.State()
			if st.Status != statefmt.StatusCompleted {
				t.Fatalf("status %s: %s", st.Status, st.StatusReason)
			}
			if got := strings.Join(outcomes(e.rec), " "); got != "1:continue 2:rate_limited 2:continue 3:completed" {
				t.Fatalf("iterations: %s", got)
			}
			if out := *st.Plan.Steps[0].Output; !strings.Contains(out, "<promise>PARTS_DONE</promise>") || strings.Contains(out, "> ") {
				t.Fatalf("step output %q", out)
			}
			if st.Iterations != 3 || st.AgentLoopSnapshot != nil {
				t.Fatalf("iterations %d, snapshot %+v", st.Iterations, st.AgentLoopSnapshot)
			}
			for n := 1; n <= 3; n++ {
				if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("part%d.txt", n))); err != nil {
					t.Fatal(err)
				}
			}
			if runs, _ := os.ReadFile(filepath.Join(ws, "runs.log")); string(runs) != "started 1\nstarted 2\nstarted 3\n" {
				t.Fatalf("runs.log %q", runs)
			}
			if msg := checkEvents(e); msg != "" {
				t.Fatal(msg)
			}
			// The rate limit said "try again in 2 seconds": the loop waited that (plus a margin).
			if sl := e.clock.Sleeps(); len(sl) != 1 || sl[0] < 3*time.Second || sl[0] > 5*time.Second {
				t.Fatalf("sleeps %v", sl)
			}
		})
	}
}

// An interruption mid-iteration loses that iteration only: the resumed loop runs it again, with
// the handoff state and feedback the last finished iteration saved.
func TestRalphLoopResumesTheIterationInFlight(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(e.dir, "ws")
	t.Setenv("FAKE_AGENT_PAUSE", "0.2")
	h, err := e.m.Create(parseTask(t, commandTask(ws, fmt.Sprintf("[sh, %s]", fakeAgent), "    env: [FAKE_AGENT_PAUSE]")))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntilFile(h, filepath.Join(ws, "working.2")); !errors.Is(err, harness.ErrPaused) {
		t.Fatalf("run: %v", err)
	}
	st := h.State()
	if st.AgentLoopSnapshot == nil || st.AgentLoopSnapshot.Iteration != 1 || !strings.Contains(string(st.AgentLoopSnapshot.Handoff), "part1") {
		t.Fatalf("snapshot after the interruption: %+v", st.AgentLoopSnapshot)
	}
	e.open() // a new process
	h, err = e.m.ResumeFromCheckpoint("ralph")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st = h.State()
	if st.Status != statefmt.StatusCompleted || st.Iterations != 3 {
		t.Fatalf("status %s, iterations %d: %s", st.Status, st.Iterations, st.StatusReason)
	}
	if runs, _ := os.ReadFile(filepath.Join(ws, "runs.log")); string(runs) != "started 1\nstarted 2\nstarted 2\nstarted 3\n" {
		t.Fatalf("runs.log %q: iteration 2 should have run twice, nothing else", runs)
	}
}

// The circuit breaker: iterations that change nothing, or fail the same way, pause the harness
// with a reason; resume starts the counts again.
func TestCircuitBreaker(t *testing.T) {
	for _, c := range []struct {
		name, command, extra, reason string
		iterations, again            int // before the breaker opens, and again after resume
	}{
		// The first iteration's output is new: three more change nothing. After resume the
		// count starts again from the same output and workspace.
		{"no progress", `[sh, -c, 'cat >/dev/null; echo "still thinking"']`, "", "3 iterations in a row changed nothing", 4, 3},
		{"same error", `[sh, -c, 'cat >/dev/null; date +%s%N >> noise; echo "fatal: no such file" >&2; exit 1']`,
			"    circuitBreaker: {sameError: 4}", "4 iterations in a row failed the same way: exit status 1: fatal: no such file", 4, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ws := filepath.Join(e.dir, "ws")
			h, err := e.m.Create(parseTask(t, commandTask(ws, c.command, c.extra)))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); !errors.Is(err, harness.ErrPaused) {
				t.Fatalf("run: %v", err)
			}
			st := h.State()
			if st.Status != statefmt.StatusPaused || !strings.Contains(st.StatusReason, "circuit breaker open") || !strings.Contains(st.StatusReason, c.reason) {
				t.Fatalf("status %s: %q", st.Status, st.StatusReason)
			}
			if st.Iterations != c.iterations || st.Plan.Steps[0].Status != statefmt.StepReady {
				t.Fatalf("iterations %d, step %s", st.Iterations, st.Plan.Steps[0].Status)
			}
			// Resume: the counts start again, the iteration number goes on.
			if err := h.Run(context.Background()); !errors.Is(err, harness.ErrPaused) {
				t.Fatalf("second run: %v", err)
			}
			if st := h.State(); st.Iterations != c.iterations+c.again || !strings.Contains(st.StatusReason, c.reason) {
				t.Fatalf("after resume: iterations %d, %q", st.Iterations, st.StatusReason)
			}
			if got := outcomes(e.rec); got[c.iterations] != fmt.Sprintf("%d:breaker_closed", c.iterations) {
				t.Fatalf("iterations: %v", got)
			}
		})
	}
}

// MaxIterations fails the step; a command without a promise completes on exit 0; the prompt can
// go as an argument; an iteration that times out has its process group killed and counts as a
// failed iteration.
func TestCommandAgentLimitsAndModes(t *testing.T) {
	t.Run("max iterations", func(t *testing.T) {
		e := newEnv(t)
		ws := filepath.Join(e.dir, "ws")
		h, _ := e.m.Create(parseTask(t, commandTask(ws, `[sh, -c, 'cat >/dev/null; date +%s%N >> progress; echo "made progress"']`, "    maxIterations: 4")))
		if err := h.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := h.State()
		if st.Status != statefmt.StatusFailed || !strings.Contains(*st.Plan.Steps[0].Error, "no completion after 4 iterations") || st.Iterations != 4 {
			t.Fatalf("status %s, iterations %d: %s", st.Status, st.Iterations, st.StatusReason)
		}
	})
	t.Run("no promise: exit 0 completes, prompt as an argument", func(t *testing.T) {
		e := newEnv(t)
		ws := filepath.Join(e.dir, "ws")
		src := strings.Replace(commandTask(ws, `[sh, -c, 'printf "%s" "$0" > prompt.txt; [ -e second ] || { touch second; echo not yet >&2; exit 1; }; echo ok', "{prompt}"]`, "    promptVia: arg"),
			"    completionPromise: PARTS_DONE\n", "", 1)
		h, _ := e.m.Create(parseTask(t, src))
		if err := h.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := h.State()
		if st.Status != statefmt.StatusCompleted || *st.Plan.Steps[0].Output != "ok" || st.Iterations != 2 {
			t.Fatalf("status %s, iterations %d, output %v: %s", st.Status, st.Iterations, st.Plan.Steps[0].Output, st.StatusReason)
		}
		prompt, _ := os.ReadFile(filepath.Join(ws, "prompt.txt"))
		for _, want := range []string{"Task: write three parts", "Step write: write the parts", "iteration 2 of at most 10", "failed (exit status 1)", "not yet"} {
			if !strings.Contains(string(prompt), want) {
				t.Errorf("prompt of iteration 2 lacks %q:\n%s", want, prompt)
			}
		}
	})
	t.Run("output over maxOutput keeps its end, where the answer is", func(t *testing.T) {
		// A CLI agent's answer comes last: the promise after a long session's output, the
		// result object after stream-json's messages. What a long iteration keeps is its end.
		for _, c := range []struct{ name, command string }{
			{"text", `[sh, -c, 'cat >/dev/null; i=0; while [ $i -lt 100 ]; do echo "working on line $i"; i=$((i+1)); done; echo "<promise>PARTS_DONE</promise>"']`},
			{"stream-json", `[sh, -c, 'cat >/dev/null; i=0; while [ $i -lt 100 ]; do echo "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"step $i\"}]}}"; i=$((i+1)); done; echo "{\"type\":\"result\",\"is_error\":false,\"result\":\"<promise>PARTS_DONE</promise>\",\"total_cost_usd\":0.5,\"usage\":{\"input_tokens\":7,\"output_tokens\":3}}"']`},
		} {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t)
				ws := filepath.Join(e.dir, "ws")
				h, _ := e.m.Create(parseTask(t, commandTask(ws, c.command, "    maxOutput: 1024\n    maxIterations: 2")))
				if err := h.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				st := h.State()
				if st.Status != statefmt.StatusCompleted || st.Iterations != 1 {
					t.Fatalf("status %s, iterations %d: %s", st.Status, st.Iterations, st.StatusReason)
				}
				if c.name == "stream-json" && (st.Budget.TokensUsed != 10 || st.Budget.CostMicroUSDUsed != 500000) {
					t.Fatalf("the result line's use was not charged: %d tokens, %d micro-USD", st.Budget.TokensUsed, st.Budget.CostMicroUSDUsed)
				}
			})
		}
	})
	t.Run("iteration timeout", func(t *testing.T) {
		e := newEnv(t)
		ws := filepath.Join(e.dir, "ws")
		h, _ := e.m.Create(parseTask(t, commandTask(ws, `[sh, -c, 'cat >/dev/null; touch started.$HARNESS_EDGE_ITERATION; sleep 60 & echo $! > bg.$HARNESS_EDGE_ITERATION; wait']`,
			"    iterationTimeout: 30s\n    circuitBreaker: {sameError: 2}")))
		go func() {
			for n := 1; n <= 2; n++ {
				for !exists(filepath.Join(ws, fmt.Sprintf("bg.%d", n))) {
					time.Sleep(2 * time.Millisecond)
				}
				e.clock.Advance(31 * time.Second)
			}
		}()
		if err := h.Run(context.Background()); !errors.Is(err, harness.ErrPaused) {
			t.Fatalf("run: %v", err)
		}
		if st := h.State(); !strings.Contains(st.StatusReason, "2 iterations in a row failed the same way: timed out after 30s") {
			t.Fatalf("reason %q", st.StatusReason)
		}
		if got := strings.Join(outcomes(e.rec), " "); got != "1:timeout 2:breaker_open" {
			t.Fatalf("iterations: %s", got)
		}
		for n := 1; n <= 2; n++ {
			b, _ := os.ReadFile(filepath.Join(ws, fmt.Sprintf("bg.%d", n)))
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			for i := 0; proctest.PidAlive(pid); i++ {
				if i == 200 {
					t.Fatalf("iteration %d's background process %d outlived the timeout", n, pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	t.Run("a process that left the iteration's process group dies with the iteration", func(t *testing.T) {
		// A CLI agent's tool may start a server in a session of its own (setsid, a daemon):
		// killing the iteration's process group does not reach it, and the next iteration
		// would share the workspace with it.
		e := newEnv(t)
		ws := filepath.Join(e.dir, "ws")
		h, _ := e.m.Create(parseTask(t, commandTask(ws, `[sh, -c, 'cat >/dev/null; setsid sh -c "echo \$\$ > bg.tmp && mv bg.tmp bg && exec sleep 60" </dev/null >/dev/null 2>&1 & while [ ! -e bg ]; do sleep 0.01; done; echo "<promise>PARTS_DONE</promise>"']`, "")))
		if err := h.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := h.State(); st.Status != statefmt.StatusCompleted {
			t.Fatalf("status %s: %s", st.Status, st.StatusReason)
		}
		b, _ := os.ReadFile(filepath.Join(ws, "bg"))
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("bg: %q", b)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		for i := 0; proctest.PidAlive(pid); i++ {
			if i == 200 {
				t.Fatalf("the iteration's process %d in a session of its own outlived the iteration", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
		var killed []string // the fallback backend adds a warning of its own
		for _, w := range e.rec.of(event.Warning) {
			if strings.Contains(w.Message, "outside its process group") {
				killed = append(killed, w.Message)
			}
		}
		if len(killed) != 1 || !strings.Contains(killed[0], "left 1 process running") {
			t.Fatalf("warnings of processes killed: %q", killed)
		}
	})
}

// RunUntilFile runs h, cancelling it once the file exists.
func runUntilFile(h *harness.Harness, file string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil && !exists(file) {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
	}()
	return h.Run(ctx)
}

// A command agent in a task without a plan runs the task's prompt as one step, in the Ralph
// loop, to its promise; without a prompt either, the harness fails saying what to add.
func TestCommandAgentWithoutAPlanRunsTheObjective(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(e.dir, "ws")
	src := strings.Replace(commandTask(ws, fmt.Sprintf("[sh, %s]", fakeAgent), ""),
		"plan: [{id: write, description: write the parts, agent: R}]\n", "", 1)
	h, err := e.m.Create(parseTask(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted || st.Plan == nil || len(st.Plan.Steps) != 1 ||
		st.Plan.Steps[0].ID != "objective" || st.Plan.Steps[0].Description != "write three parts" {
		t.Fatalf("status %s (%s), plan %+v", st.Status, st.StatusReason, st.Plan)
	}
	if got := outcomes(e.rec); len(got) == 0 || got[len(got)-1] != "3:completed" {
		t.Fatalf("iterations %v, want the promise kept on the third", got)
	}

	noPrompt := strings.Replace(strings.Replace(src, "prompt: write three parts\n", "", 1), "id: ralph", "id: ralph2", 1)
	h, err = e.m.Create(parseTask(t, noPrompt))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := h.State(); st.Status != statefmt.StatusFailed || !strings.Contains(st.StatusReason, "give the task a prompt") {
		t.Fatalf("without a prompt: %s (%s)", st.Status, st.StatusReason)
	}
}

// An iteration that exits 0 having changed the workspace did its work: a short final answer
// that speaks of a rate limit or a 429 is its report, and the iteration counts. The same answer
// from an iteration that changed nothing is read as a limit message.
func TestAnIterationThatWorkedIsNotReadAsRateLimited(t *testing.T) {
	for _, c := range []struct {
		name, write, want string
	}{
		{"changed the workspace", `echo fixed > "upload-$HARNESS_EDGE_ITERATION.txt";`, "1:continue 2:completed"},
		{"changed nothing", ``, "1:rate_limited 1:continue 2:completed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ws := filepath.Join(e.dir, "ws")
			script := `cat >/dev/null; n=$HARNESS_EDGE_ITERATION; ` + c.write + `
if [ "$n" -ge 2 ]; then echo "<promise>PARTS_DONE</promise>"; exit 0; fi
if [ -e seen ]; then echo "Uploaded the parts."; exit 0; fi
: > seen; echo "Retried the upload after 429 Too Many Requests."`
			if c.write == "" {
				// The marker is the workspace's only change: kept out of it, in the store's dir.
				script = strings.ReplaceAll(script, "seen", filepath.Join(e.dir, "seen"))
			}
			h, err := e.m.Create(parseTask(t, commandTask(ws, fmt.Sprintf("[sh, -c, %q]", script), "")))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := h.State(); st.Status != statefmt.StatusCompleted {
				t.Fatalf("status %s: %s", st.Status, st.StatusReason)
			}
			if got := strings.Join(outcomes(e.rec), " "); got != c.want {
				t.Fatalf("iterations: %s, want %s", got, c.want)
			}
		})
	}
}
