package cli

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// fakeClaude is the path of the test agent that prints what `claude -p --output-format json` does.
func fakeClaude(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("testdata/fake-claude.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// loopArgs are the arguments of `loop` around the fake agent, with its FAKE_* settings passed
// through to it.
func loopArgs(t *testing.T, db, ws, id string, extra ...string) []string {
	args := []string{"--store", db, "loop", "--id", id, "--promise", "PARTS_DONE", "--max-iterations", "5",
		"--prompt", "Write the parts, one per session.", "--workspace", ws}
	for _, v := range []string{"FAKE_FORMAT", "FAKE_PROMISE_AT", "FAKE_PAUSE_AT", "FAKE_PAUSE", "FAKE_RELEASE", "FAKE_EMPTY_AT", "FAKE_EMPTY_TIMES", "FAKE_STATE", "FAKE_COST"} {
		args = append(args, "--env", v)
	}
	args = append(args, extra...)
	return append(args, "--", "sh", fakeClaude(t))
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, _ := os.ReadFile(p)
	return string(b)
}

func TestLoopRunsTheAgentUntilItKeepsThePromise(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	code, out := binary(t, db, loopArgs(t, db, ws, "ralph1", "--progress")[2:]...)
	if code != ExitOK {
		t.Fatalf("loop: exit %d\n%s", code, out)
	}
	// --progress: a line as each iteration starts, and one with its time as it ends.
	if !regexp.MustCompile(`iteration 1 \(step objective\) started \d\d:\d\d:\d\d\n\s+iteration 1 \(step objective\): continue, \d+\.\ds`).MatchString(out) ||
		!strings.Contains(out, "iteration 3 (step objective): completed, ") {
		t.Fatalf("--progress lines missing:\n%s", out)
	}
	if runs := readFile(t, filepath.Join(ws, "runs.log")); runs != "started 1\nstarted 2\nstarted 3\n" {
		t.Fatalf("runs.log %q", runs)
	}
	st := storeState(t, db, "ralph1")
	if st.Status != statefmt.StatusCompleted || st.Iterations != 3 || len(st.Plan.Steps) != 1 ||
		!strings.Contains(*st.Plan.Steps[0].Output, "<promise>PARTS_DONE</promise>") {
		t.Fatalf("status %s, iterations %d, steps %+v", st.Status, st.Iterations, st.Plan.Steps)
	}
	// Iteration 2's prompt carries the objective and what iteration 1 said (its result text).
	p2 := readFile(t, filepath.Join(ws, "prompt.2"))
	for _, want := range []string{"Write the parts, one per session.", "Wrote part 1; more to do.", "<promise>PARTS_DONE</promise>"} {
		if !strings.Contains(p2, want) {
			t.Fatalf("iteration 2's prompt lacks %q:\n%s", want, p2)
		}
	}
	// The cost and tokens Claude's JSON reported are recorded with each iteration, and the
	// tokens charged to the harness.
	s, err := store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cost float64
	var tokens int64
	_ = s.Events("ralph1", 0, func(e event.Event) bool {
		if e.Type == event.Iteration && e.Usage != nil {
			cost += e.Usage.CostUSD
			tokens += e.Usage.Tokens()
			if e.Usage.SessionID == "" || e.Usage.CacheReadTokens != 2048 {
				t.Errorf("iteration %d's usage: %+v", e.Iteration, *e.Usage)
			}
		}
		return true
	})
	s.Close()
	if math.Abs(cost-3*0.0125) > 1e-9 || tokens != 3*(512+2048)+1001+1002+1003+201+202+203 || st.Budget.TokensUsed != tokens {
		t.Fatalf("recorded $%v and %d tokens (%d charged)", cost, tokens, st.Budget.TokensUsed)
	}
	// show and events treat it like any harness.
	if code, out := binary(t, db, "show", "ralph1"); code != ExitOK || !strings.Contains(out, "objective") || !strings.Contains(out, "completed") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	if code, out := binary(t, db, "events", "ralph1"); code != ExitOK || !strings.Contains(out, "iteration 3") {
		t.Fatalf("events: exit %d\n%s", code, out)
	}
}

// The task --print-task writes is the one loop runs: `run` accepts it and gets the same loop.
func TestLoopPrintTaskIsATaskFileRunAccepts(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	code, out, stderr := run(t, loopArgs(t, db, ws, "printed", "--print-task")...)
	if code != ExitOK {
		t.Fatalf("--print-task: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"id: printed", "driver: command", "completionPromise: PARTS_DONE", "maxIterations: 5", "workspace: " + ws, "FAKE_FORMAT"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the printed task lacks %q:\n%s", want, out)
		}
	}
	if fileExists(db) {
		t.Fatal("--print-task touched the store")
	}
	file := writeTask(t, dir, "loop.yaml", out)
	if code, out := binary(t, db, "run", file); code != ExitOK {
		t.Fatalf("run of the printed task: exit %d\n%s", code, out)
	}
	if st := storeState(t, db, "printed"); st.Status != statefmt.StatusCompleted || st.Iterations != 3 {
		t.Fatalf("status %s, iterations %d", st.Status, st.Iterations)
	}
}

// SIGKILL during iteration 2; resume runs iteration 2 again and goes on, never iteration 1.
func TestLoopKilledInIteration2ResumesWithoutRerunningIteration1(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	t.Setenv("FAKE_PAUSE_AT", "2")
	t.Setenv("FAKE_PAUSE", "30")
	cmd := child(loopArgs(t, db, ws, "killed")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !fileExists(filepath.Join(ws, "working.2")) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("iteration 2 never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !st.Signaled() {
		t.Fatalf("the loop ended before the kill: exit %d", cmd.ProcessState.ExitCode())
	}
	t.Setenv("FAKE_PAUSE_AT", "")
	if code, out := binary(t, db, "resume", "killed"); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if runs := readFile(t, filepath.Join(ws, "runs.log")); runs != "started 1\nstarted 2\nstarted 2\nstarted 3\n" {
		t.Fatalf("runs.log %q: only iteration 2 should have run twice", runs)
	}
	if st := storeState(t, db, "killed"); st.Status != statefmt.StatusCompleted || st.Iterations != 3 {
		t.Fatalf("status %s, iterations %d", st.Status, st.Iterations)
	}
}

// With a daemon owning the store, loop hands the loop to it, and so does submit --loop.
func TestLoopGoesThroughTheDaemon(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	ws1, ws2 := mkdir(t, filepath.Join(dir, "ws1")), mkdir(t, filepath.Join(dir, "ws2"))
	startDaemon(t, db)
	code, out := binary(t, db, loopArgs(t, db, ws1, "viadaemon")[2:]...)
	if code != ExitOK || !strings.Contains(out, "queued in the daemon") {
		t.Fatalf("loop with a daemon: exit %d\n%s", code, out)
	}
	args := loopArgs(t, db, ws2, "submitted")
	args[2] = "--loop"
	code, out = binary(t, db, append([]string{"submit"}, args[2:]...)...)
	if code != ExitOK || !strings.Contains(out, "submitted: harness submitted") {
		t.Fatalf("submit --loop: exit %d\n%s", code, out)
	}
	for _, id := range []string{"viadaemon", "submitted"} {
		if st := waitStatus(t, db, id, statefmt.StatusCompleted); st.Iterations != 3 {
			t.Fatalf("%s: %d iterations", id, st.Iterations)
		}
	}
}

func TestLoopRefusesBadFlagsAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"loop", "--prompt", "x", "--workspace", ws}, "no agent command"},
		{[]string{"loop", "--workspace", ws, "--", "sh"}, "no objective: give --prompt TEXT or --prompt-file FILE, or write " + filepath.Join(ws, "PROMPT.md")},
		{[]string{"loop", "--prompt", "x", "--prompt-file", "p.md", "--workspace", ws, "--", "sh"}, "give one of them"},
		{[]string{"loop", "--prompt", "x", "--max-iterations", "-1", "--workspace", ws, "--", "sh"}, "--max-iterations -1"},
		{[]string{"loop", "--prompt", "x", "--autonomy", "9", "--workspace", ws, "--", "sh"}, "--autonomy 9: give 1 to 5"},
		{[]string{"loop", "--prompt", "x", "--workspace", filepath.Join(dir, "nowhere"), "--", "sh"}, "not a directory"},
		{[]string{"submit", "task.yaml", "--promise", "X"}, "--promise: only with --loop"},
	} {
		code, _, stderr := run(t, append([]string{"--store", db}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	code, _, stderr := run(t, "--store", db, "loop", "--prompt", "x", "--workspace", ws, "--", "no-such-agent-here")
	if code != ExitError || !strings.Contains(stderr, `"no-such-agent-here" was not found on PATH`) {
		t.Errorf("a missing agent: exit %d, %q", code, stderr)
	}
	if fileExists(db) {
		t.Fatal("a refused loop touched the store")
	}
}

// Codex's JSON lines work the same way: its agent message is the answer, its usage recorded.
func TestLoopReadsCodexJSONLines(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	t.Setenv("FAKE_FORMAT", "codex")
	if code, out := binary(t, db, loopArgs(t, db, ws, "codex")[2:]...); code != ExitOK {
		t.Fatalf("loop: exit %d\n%s", code, out)
	}
	st := storeState(t, db, "codex")
	if st.Iterations != 3 || *st.Plan.Steps[0].Output != "All parts are written. <promise>PARTS_DONE</promise>" {
		t.Fatalf("iterations %d, output %q", st.Iterations, *st.Plan.Steps[0].Output)
	}
	if want := int64(1001 + 1002 + 1003 + 201 + 202 + 203); st.Budget.TokensUsed != want {
		t.Fatalf("%d tokens charged, want %d", st.Budget.TokensUsed, want)
	}
	// The next prompt's feedback is the agent message, not the JSON around it.
	if p2 := readFile(t, filepath.Join(ws, "prompt.2")); !strings.Contains(p2, "Its final output ended with:\nWrote part 1; more to do.") || strings.Contains(p2, "turn.completed") {
		t.Fatalf("iteration 2's prompt:\n%s", p2)
	}
}

// An agent whose JSON says is_error did not complete, even with the promise in its result and
// exit status 0.
func TestLoopTreatsAReportedErrorAsAFailedIteration(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	agent := writeTask(t, dir, "erring.sh", `#!/bin/sh
cat > /dev/null
echo "$HARNESS_EDGE_ITERATION" >> runs.log
printf '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"API Error: overloaded <promise>PARTS_DONE</promise>","session_id":"s","total_cost_usd":0.002,"usage":{"input_tokens":10,"output_tokens":0}}\n'
`)
	code, out := binary(t, db, "loop", "--id", "erring", "--promise", "PARTS_DONE", "--max-iterations", "2", "--prompt", "x", "--workspace", ws, "--", "sh", agent)
	if code != ExitError || !strings.Contains(out, "no completion after 2 iterations") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	st := storeState(t, db, "erring")
	if st.Status != statefmt.StatusFailed || !strings.Contains(*st.Plan.Steps[0].Error, "ended in an error: API Error: overloaded") {
		t.Fatalf("status %s, error %v", st.Status, *st.Plan.Steps[0].Error)
	}
}

// A cost budget, counted from the cost the agent reports, opens a gate at autonomy 3 before the
// iteration that would go past it; approving extends it, and the loop goes on where it was.
// At autonomy 4 the loop fails instead.
func TestLoopCostBudgetOpensAGateAtAutonomy3(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	code, out := binary(t, db, loopArgs(t, db, ws, "costly", "--budget-usd", "0.02", "--autonomy", "3")[2:]...)
	if code != ExitWaiting || !strings.Contains(out, "gate g1 on the cost budget at step objective waits for a human") {
		t.Fatalf("loop over its cost budget: exit %d\n%s", code, out)
	}
	if runs := readFile(t, filepath.Join(ws, "runs.log")); runs != "started 1\nstarted 2\n" {
		t.Fatalf("runs.log %q: the gate must stop the loop before iteration 3", runs)
	}
	code, out = binary(t, db, "show", "costly")
	if code != ExitOK || !strings.Contains(out, "cost $0.0250/$0.0200") || !strings.Contains(out, "the harness has spent $0.0250 of its budget of $0.0200") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	if code, out := binary(t, db, "approve", "costly"); code != ExitOK {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	if code, out := binary(t, db, "resume", "costly"); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if runs := readFile(t, filepath.Join(ws, "runs.log")); runs != "started 1\nstarted 2\nstarted 3\n" {
		t.Fatalf("runs.log %q", runs)
	}
	st := storeState(t, db, "costly")
	if st.Status != statefmt.StatusCompleted || st.Budget.CostMicroUSDUsed != 37500 || st.Budget.CostMicroUSD != 40000 {
		t.Fatalf("status %s, budget %+v", st.Status, *st.Budget)
	}
	code, out = binary(t, db, "report", "--since", "0")
	if code != ExitOK || !strings.Contains(out, "$0.0375 of $0.0400") || !strings.Contains(out, "agents report $0.0375 spent") {
		t.Fatalf("report: exit %d\n%s", code, out)
	}

	ws4 := mkdir(t, filepath.Join(dir, "ws4"))
	code, out = binary(t, db, loopArgs(t, db, ws4, "costly4", "--budget-usd", "0.02", "--autonomy", "4")[2:]...)
	if code != ExitError || !strings.Contains(out, "budget exceeded: the harness has spent $0.0250 of its budget of $0.0200") {
		t.Fatalf("autonomy 4: exit %d\n%s", code, out)
	}
	if st := storeState(t, db, "costly4"); st.Status != statefmt.StatusFailed {
		t.Fatalf("autonomy 4: %s", st.Status)
	}
}

func TestTaskCostBudgetMustBeAnAmount(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	file := writeTask(t, dir, "t.yaml", "agent: A\nbudget: {costUSD: -1}\nagents: {A: {driver: script, script: {plan: [{id: a, description: a}]}}}\n")
	code, _, stderr := run(t, "--store", db, "run", file)
	if code != ExitError || !strings.Contains(stderr, "budget.costUSD: -1 is not a budget in US dollars") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, _, stderr = run(t, "--store", db, "loop", "--prompt", "x", "--budget-usd", "-2", "--workspace", dir, "--", "sh")
	if code != ExitUsage || !strings.Contains(stderr, "--budget-usd -2") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if fileExists(db) {
		t.Fatal("a refused task touched the store")
	}
}

// Iterations that print nothing and change nothing do not count toward --max-iterations, and
// three in a row open the circuit breaker; resume goes on.
func TestLoopEmptyIterationsAreNotCountedAndTripTheBreaker(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	t.Setenv("FAKE_STATE", mkdir(t, filepath.Join(dir, "state")))
	t.Setenv("FAKE_EMPTY_AT", "2")
	t.Setenv("FAKE_EMPTY_TIMES", "2")
	// Two empty runs of iteration 2, then it works: 3 counted iterations fit in a maximum of 3.
	args := loopArgs(t, db, ws, "empties")
	args[8] = "3" // --max-iterations
	if code, out := binary(t, db, args[2:]...); code != ExitOK {
		t.Fatalf("loop: exit %d\n%s", code, out)
	}
	st := storeState(t, db, "empties")
	if st.Status != statefmt.StatusCompleted || st.Iterations != 3 {
		t.Fatalf("status %s, %d iterations", st.Status, st.Iterations)
	}
	code, events := binary(t, db, "events", "empties")
	if code != ExitOK || strings.Count(events, "iteration 2  empty") != 2 || !strings.Contains(events, "not counted") {
		t.Fatalf("events:\n%s", events)
	}

	// Three empty runs in a row: the breaker pauses the loop.
	ws2 := mkdir(t, filepath.Join(dir, "ws2"))
	t.Setenv("FAKE_STATE", mkdir(t, filepath.Join(dir, "state2")))
	t.Setenv("FAKE_EMPTY_TIMES", "3")
	code, out := binary(t, db, loopArgs(t, db, ws2, "silent")[2:]...)
	if code != ExitWaiting || !strings.Contains(out, "circuit breaker open") || !strings.Contains(out, "3 empty iterations in a row") {
		t.Fatalf("loop: exit %d\n%s", code, out)
	}
	if code, out := binary(t, db, "resume", "silent"); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if st := storeState(t, db, "silent"); st.Status != statefmt.StatusCompleted || st.Iterations != 3 {
		t.Fatalf("status %s, %d iterations", st.Status, st.Iterations)
	}

	// countEmptyIterations: true counts them: the empty run is iteration 2, and the agent's
	// third run is iteration 3.
	ws3 := mkdir(t, filepath.Join(dir, "ws3"))
	t.Setenv("FAKE_STATE", mkdir(t, filepath.Join(dir, "state3")))
	t.Setenv("FAKE_EMPTY_TIMES", "2")
	args = loopArgs(t, db, ws3, "counted", "--print-task")
	args[8] = "3"
	code, src, stderr := run(t, args...)
	if code != ExitOK {
		t.Fatalf("--print-task: %s", stderr)
	}
	src = strings.Replace(src, "    driver: command\n", "    driver: command\n    countEmptyIterations: true\n", 1)
	if code, out = binary(t, db, "run", writeTask(t, dir, "counted.yaml", src)); code != ExitOK {
		t.Fatalf("countEmptyIterations: exit %d\n%s", code, out)
	}
	if runs := readFile(t, filepath.Join(ws3, "runs.log")); runs != "started 1\nstarted 3\n" {
		t.Fatalf("runs.log %q: the empty run should have been iteration 2", runs)
	}
	if _, events := binary(t, db, "events", "counted"); strings.Contains(events, "empty") {
		t.Fatalf("a counted empty iteration is reported as empty:\n%s", events)
	}
}
