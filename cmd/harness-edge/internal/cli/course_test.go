package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// flakyTask: prep, then build, which fails for good on its first attempt (after a tool call),
// then ship, which depends on build.
const flakyTask = `id: %s
agent: A
workspace: ./ws
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      plan:
        - {id: prep, description: prepare, agent: A}
        - {id: build, description: build it, agent: A, dependsOn: [prep]}
        - {id: ship, description: ship it, agent: A, dependsOn: [build]}
      steps:
        prep: [{output: ready}]
        build:
          - {tool: write_file, args: {path: build.log, content: tried}}
          - {fail: permanent, message: "compiler not found: gcc-typo", times: 1}
          - {output: built}
        ship: [{output: shipped}]
`

// expectIn runs the command line in its own process on db and checks its exit code and that
// its output holds want.
func expectIn(t *testing.T, db string, wantCode int, want string, args ...string) string {
	t.Helper()
	code, out := binary(t, db, args...)
	if code != wantCode || !strings.Contains(out, want) {
		t.Fatalf("%v: exit %d (want %d), output lacks %q:\n%s", args, code, wantCode, want, out)
	}
	return out
}

// A failed harness is retried from the command line (real processes, a store on disk): the
// refusals change nothing, the retry makes the failed step ready and its blocked dependent
// pending, resume completes the harness, and the history is kept: the failed attempt's tool
// call, the attempt counter, the step_failed event, and a course event naming who retried.
func TestRetryOfAFailedHarnessCompletesKeepingItsHistory(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	taskFile := writeTask(t, dir, "t.yaml", strings.ReplaceAll(flakyTask, "%s", "r"))
	expectIn(t, db, ExitError, "compiler not found", "run", taskFile)
	failed := storeState(t, db, "r")
	expectIn(t, db, ExitError, "already exists and has failed (retry it with `harness-edge retry r`", "run", taskFile)

	// Refusals name the problem and change nothing.
	expectIn(t, db, ExitError, `no such step "nope" (steps: prep, build, ship)`, "retry", "r", "--step", "nope")
	expectIn(t, db, ExitError, "step ship is blocked, not failed: nothing to retry", "retry", "r", "--step", "ship")
	expectIn(t, db, ExitError, "not found", "retry", "missing")
	if after := storeState(t, db, "r"); !sameState(failed, after) {
		t.Fatal("a refused retry changed the harness")
	}

	out := expectIn(t, db, ExitOK, "step build ready again; unblocked ship; it is paused", "retry", "r", "--by", "ada", "--reason", "fixed the compiler name")
	if !strings.Contains(out, "harness-edge resume r") {
		t.Fatalf("retry does not say how to go on:\n%s", out)
	}
	expectIn(t, db, ExitOK, "retry (step build attempt 2; unblocked ship) by ada: fixed the compiler name", "show", "r")
	expectIn(t, db, ExitOK, "harness r: completed", "resume", "r")
	expectIn(t, db, ExitError, "has completed: nothing to retry", "retry", "r")

	st := storeState(t, db, "r")
	build := st.Plan.Steps[1]
	if st.Status != statefmt.StatusCompleted || build.Attempts != 2 || !strings.HasSuffix(deref(build.Output), "built") {
		t.Fatalf("status %s, build %+v", st.Status, build)
	}
	calls := 0
	for _, c := range st.ToolCallHistory {
		if c.CallName == "write_file" {
			calls++
		}
	}
	if calls != 2 {
		t.Fatalf("%d write_file calls in the history, want 2 (the failed attempt's is kept)", calls)
	}
	var sawFailed, sawRetry, sawBack bool
	for _, e := range eventsOf(t, db, "r") {
		switch {
		case e.Type == event.StepFailed && e.StepID == "build":
			sawFailed = true
		case e.Type == event.Course && e.Action == harness.CourseRetry:
			sawRetry = e.By == "ada" && e.Reason == "fixed the compiler name"
		case e.Type == event.StateTransition && e.From == statefmt.StatusFailed && e.To == statefmt.StatusPaused:
			sawBack = true
		}
	}
	if !sawFailed || !sawRetry || !sawBack {
		t.Fatalf("events: step_failed %v, course retry by ada %v, failed -> paused %v", sawFailed, sawRetry, sawBack)
	}
	expectIn(t, db, ExitOK, "retry  by ada  (fixed the compiler name)  step build attempt 2", "events", "r")
}

// Retry goes through a daemon's control socket and its HTTP API with the same answers and
// refusals; the daemon then resumes the retried harness to completion.
func TestRetryThroughTheDaemonAndItsHTTPAPI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	for _, id := range []string{"a", "b"} {
		expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, id+".yaml", strings.ReplaceAll(flakyTask, "%s", id)))
	}
	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	code, body := d.http("POST", "/v1/harnesses/a/retry", token, []byte(`{"step": "ship"}`))
	if code != 409 || !strings.Contains(body, "step ship is blocked, not failed") {
		t.Fatalf("HTTP retry of a blocked step: %d %s", code, body)
	}
	code, body = d.http("POST", "/v1/harnesses/a/retry", token, []byte(`{"step": "nope"}`))
	if code != 400 || !strings.Contains(body, `no such step \"nope\"`) {
		t.Fatalf("HTTP retry of an unknown step: %d %s", code, body)
	}
	code, body = d.http("POST", "/v1/harnesses/a/retry", token, []byte(`{"bogus": 1}`))
	if code != 400 {
		t.Fatalf("HTTP retry with an unknown field: %d %s", code, body)
	}
	code, body = d.http("POST", "/v1/harnesses/a/retry", token, []byte(`{"step": "build", "by": "bob", "reason": "again"}`))
	var res harness.RetryResult
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Status != statefmt.StatusPaused || strings.Join(res.Steps, ",") != "build" {
		t.Fatalf("HTTP retry: %d %s", code, body)
	}
	// The same through the socket, with the same refusal for the one just retried.
	expectIn(t, db, ExitError, "step build is ready, not failed", "retry", "a", "--step", "build")
	out := expectIn(t, db, ExitOK, `"status": "paused"`, "retry", "b", "--json")
	if !strings.Contains(out, `"build"`) {
		t.Fatalf("retry --json:\n%s", out)
	}
	for _, id := range []string{"a", "b"} {
		expectIn(t, db, ExitOK, "queued in the daemon", "resume", id)
		waitStatus(t, db, id, statefmt.StatusCompleted)
	}
}

func sameState(a, b *statefmt.HarnessState) bool {
	ja, _ := statefmt.EncodeJSON(a)
	jb, _ := statefmt.EncodeJSON(b)
	return string(ja) == string(jb)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
