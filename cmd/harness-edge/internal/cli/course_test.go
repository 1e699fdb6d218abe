package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/inbox"
	"github.com/harness-edge/harness-edge/runtime/itlog"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
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
	// A replan over HTTP: refused whole with the problem's line, then applied.
	code, body = d.http("POST", "/v1/harnesses/b/replan", token, []byte(`{"change": "skip: [prep]\n", "name": "fix.yaml"}`))
	if code != 400 || !strings.Contains(body, "fix.yaml:1: skip[0]: step prep has completed") {
		t.Fatalf("HTTP replan of a completed step: %d %s", code, body)
	}
	code, body = d.http("POST", "/v1/harnesses/b/replan", token, []byte(`{"change": "replace:\n  build: {description: build with clang}\n", "by": "bob"}`))
	if code != 200 || !strings.Contains(body, `"summary":"replace build (description)"`) {
		t.Fatalf("HTTP replan: %d %s", code, body)
	}
	// The same through the socket, with the same refusal for the one just retried.
	expectIn(t, db, ExitError, "step build is ready, not failed", "retry", "a", "--step", "build")
	// b's failed step was replaced (it is ready again): the retry only takes the harness back.
	out := expectIn(t, db, ExitOK, `"status": "paused"`, "retry", "b", "--json")
	if !strings.Contains(out, `"steps": []`) {
		t.Fatalf("retry --json:\n%s", out)
	}
	for _, id := range []string{"a", "b"} {
		expectIn(t, db, ExitOK, "queued in the daemon", "resume", id)
		waitStatus(t, db, id, statefmt.StatusCompleted)
	}
	// Named checkpoints and rollback over HTTP.
	if code, body := d.http("POST", "/v1/harnesses/a/checkpoints", token, []byte(`{"name": "done", "by": "bob"}`)); code != 201 || !strings.Contains(body, `"name":"done"`) {
		t.Fatalf("HTTP checkpoint: %d %s", code, body)
	}
	if code, body := d.http("POST", "/v1/harnesses/a/checkpoints", token, []byte(`{"name": "done"}`)); code != 409 {
		t.Fatalf("HTTP checkpoint of a taken name: %d %s", code, body)
	}
	if code, body := d.http("GET", "/v1/harnesses/a/checkpoints", token, nil); code != 200 || !strings.Contains(body, `"done"`) {
		t.Fatalf("HTTP checkpoints: %d %s", code, body)
	}
	if code, body := d.http("POST", "/v1/harnesses/a/rollback", token, []byte(`{}`)); code != 400 {
		t.Fatalf("HTTP rollback to nothing: %d %s", code, body)
	}
	if code, body := d.http("POST", "/v1/harnesses/a/rollback", token, []byte(`{"to": "done", "reason": "check"}`)); code != 200 || !strings.Contains(body, `"status":"paused"`) || !strings.Contains(body, `"to":"done"`) {
		t.Fatalf("HTTP rollback: %d %s", code, body)
	}
	expectIn(t, db, ExitOK, "rolled back to \"done\" by", "show", "a")
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

// bulkyTask: a completed harness of `steps` steps whose outputs are a few KB of varied text
// each; with delegate, its last step runs in a sub-agent; with gate, the last step waits for a
// human; with fail, the last step fails.
func bulkyTask(id string, steps int, kind string) string {
	r := rand.New(rand.NewPCG(uint64(len(id)), uint64(steps)))
	words := []string{"heron", "dawn", "river", "stone", "ledger", "quartz", "ember", "willow", "signal", "harbor", "copper", "meadow"}
	var plan, script strings.Builder
	for i := range steps {
		var text strings.Builder
		for range 400 {
			text.WriteString(words[r.IntN(len(words))])
			fmt.Fprintf(&text, "%d ", r.IntN(1000))
		}
		agent, extra := "A", ""
		if i == steps-1 {
			switch kind {
			case "delegate":
				agent = "B"
			case "gate":
				extra = ", critical: true"
			}
		}
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("s%d", i-1)
		}
		fmt.Fprintf(&plan, "  - {id: s%d, description: step %d, agent: %s, dependsOn: [%s]%s}\n", i, i, agent, dep, extra)
		if i == steps-1 && kind == "fail" {
			fmt.Fprintf(&script, "        s%d: [{fail: permanent, message: broken}]\n", i)
			continue
		}
		fmt.Fprintf(&script, "        s%d: [{output: %q}]\n", i, text.String())
	}
	return fmt.Sprintf(`id: %s
agent: A
autonomy: 3
agents:
  A:
    driver: script
    script:
      steps:
%s  B: {driver: script, script: {steps: {"*": [{output: delegated}]}}}
plan:
%s`, id, script.String(), plan.String())
}

// Delete and prune from the command line and through a daemon's HTTP API (real processes, a
// store on disk): the refusals change nothing, a dry run deletes nothing, and what is deleted
// gives its disk back (measured on the store's files), with its sub-agents and events; verify
// passes on what remains, and the freed id can run again.
func TestDeleteAndPruneGiveTheDiskBack(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	for _, c := range []struct {
		id, kind string
		code     int
	}{{"done1", "", ExitOK}, {"done2", "", ExitOK}, {"fam", "delegate", ExitOK}, {"broke", "fail", ExitError},
		{"waits", "gate", ExitWaiting}, {"http1", "", ExitOK}} {
		code, out := binary(t, db, "run", writeTask(t, dir, c.id+".yaml", bulkyTask(c.id, 30, c.kind)))
		if code != c.code {
			t.Fatalf("run %s: exit %d:\n%s", c.id, code, out)
		}
	}
	ids := func() string {
		t.Helper()
		code, out := binary(t, db, "ls", "--json")
		var l []struct{ ID string }
		if code != ExitOK || json.Unmarshal([]byte(out), &l) != nil {
			t.Fatalf("ls: %d %s", code, out)
		}
		var s []string
		for _, e := range l {
			s = append(s, e.ID)
		}
		return strings.Join(s, ",")
	}
	all := ids()
	if all != "broke,done1,done2,fam,fam.s29,http1,waits" {
		t.Fatalf("harnesses: %s", all)
	}

	// Refusals and a dry run change nothing.
	expectIn(t, db, ExitError, "waits for a human", "delete", "waits")
	expectIn(t, db, ExitError, "is a sub-agent of fam: delete fam", "delete", "fam.s29")
	expectIn(t, db, ExitError, "not found", "delete", "nobody")
	expectIn(t, db, ExitUsage, "prune needs --older-than", "prune")
	expectIn(t, db, ExitUsage, `age "soon"`, "prune", "--older-than", "soon")
	// Ages too long for a duration, and empty status lists, are refused: either once deleted
	// every finished harness.
	expectIn(t, db, ExitUsage, `age "15251w": at most a hundred years`, "prune", "--older-than", "15251w", "--dry-run")
	for _, empty := range []string{"", ",", " "} {
		expectIn(t, db, ExitUsage, "names no status", "prune", "--older-than", "0s", "--status", empty, "--dry-run")
	}
	expectIn(t, db, ExitError, `status "running" cannot be pruned`, "prune", "--older-than", "0s", "--status", "running")
	expectIn(t, db, ExitOK, "0 harnesses deleted", "prune", "--older-than", "30d")
	out := expectIn(t, db, ExitOK, "would delete fam (completed", "prune", "--older-than", "0s", "--dry-run")
	if !strings.Contains(out, "with 1 sub-agent (fam.s29)") || strings.Contains(out, "waits") || !strings.Contains(out, "5 harnesses would be deleted") {
		t.Fatalf("dry run:\n%s", out)
	}
	if got := ids(); got != all {
		t.Fatalf("a refusal or dry run changed the store: %s", got)
	}

	// delete, with --force for the one that waits.
	before := store.DirUsage(db)
	expectIn(t, db, ExitOK, "deleted waits (paused", "delete", "waits", "--force")
	out = expectIn(t, db, ExitOK, "1 harness deleted", "prune", "--older-than", "0s", "--status", "failed")
	if !strings.Contains(out, "deleted broke (failed") {
		t.Fatalf("prune --status failed:\n%s", out)
	}
	var res control.DeleteResult
	out = expectIn(t, db, ExitOK, `"freedBytes"`, "delete", "fam", "--json")
	if json.Unmarshal([]byte(out), &res) != nil || len(res.Harnesses) != 1 || strings.Join(res.Harnesses[0].SubAgents, ",") != "fam.s29" {
		t.Fatalf("delete --json:\n%s", out)
	}
	// A harness's iteration logs and unread messages go with it; another's stay.
	var leftovers []string
	for _, id := range []string{"done1", "done2"} {
		for _, f := range []string{filepath.Join(itlog.Dir(db), id, "s1", "1.log"), filepath.Join(inbox.Dir(db), id, "1.msg")} {
			if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte("left over\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			leftovers = append(leftovers, f)
		}
	}
	expectIn(t, db, ExitOK, "deleted done1", "delete", "done1")
	for i, f := range leftovers {
		if _, err := os.Stat(f); (err == nil) != (i >= 2) {
			t.Errorf("after delete done1, %s: %v", f, err)
		}
	}
	after := store.DirUsage(db)
	t.Logf("store on disk: %d bytes before deleting 4 of 6 harnesses (and a sub-agent), %d after", before, after)
	if after >= before || ids() != "done2,http1" {
		t.Fatalf("store %d -> %d bytes, harnesses %s", before, after, ids())
	}
	expectIn(t, db, ExitOK, "", "verify")
	if evs := eventsOf(t, db, "done2"); len(evs) == 0 {
		t.Fatal("the kept harness lost its events")
	}
	code, _ := binary(t, db, "events", "fam")
	if code == ExitOK {
		t.Fatal("the deleted harness still has events")
	}
	expectIn(t, db, ExitOK, "the store takes", "report")
	expectIn(t, db, ExitOK, "on disk", "doctor")
	// The id is free again.
	expectIn(t, db, ExitOK, "harness done1: completed", "run", filepath.Join(dir, "done1.yaml"))

	// Through the daemon: DELETE and POST /v1/prune, the same refusals.
	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	if code, body := d.http("DELETE", "/v1/harnesses/fam.s29", token, nil); code != 404 {
		t.Fatalf("HTTP delete of a deleted sub-agent: %d %s", code, body)
	}
	if code, body := d.http("DELETE", "/v1/harnesses/http1?force=maybe", token, nil); code != 400 {
		t.Fatalf("HTTP delete with a bad force: %d %s", code, body)
	}
	if code, body := d.http("POST", "/v1/prune", token, []byte(`{}`)); code != 400 || !strings.Contains(body, "olderThan") {
		t.Fatalf("HTTP prune without an age: %d %s", code, body)
	}
	if code, body := d.http("DELETE", "/v1/harnesses/http1", token, nil); code != 200 || !strings.Contains(body, `"id":"http1"`) {
		t.Fatalf("HTTP delete: %d %s", code, body)
	}
	if code, body := d.http("POST", "/v1/prune", token, []byte(`{"olderThan": "0s", "dryRun": true}`)); code != 200 || !strings.Contains(body, `"id":"done1"`) {
		t.Fatalf("HTTP prune dry run: %d %s", code, body)
	}
	expectIn(t, db, ExitOK, "2 harnesses deleted", "prune", "--older-than", "0s")
	if got := ids(); got != "" {
		t.Fatalf("left after prune: %s", got)
	}
	expectIn(t, db, ExitOK, "", "verify")
}

// gatedTask: prep, then ship (critical: a human approves it at autonomy 3), then report.
const gatedTask = `id: %s
agent: A
autonomy: 3
workspace: ./ws
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      plan:
        - {id: prep, description: prepare, agent: A}
        - {id: ship, description: ship it, agent: A, dependsOn: [prep], critical: true}
        - {id: report, description: report, agent: A, dependsOn: [ship]}
      steps:
        prep: [{output: ready}]
        ship: [{tool: write_file, args: {path: shipped.txt, content: "yes"}}, {output: shipped}]
        report: [{output: reported}]
`

// A rejected gate is a dead end no more: its step is skipped with a replan and the harness
// resumes to completion without running it (real processes, a store on disk).
func TestRejectReplanSkipResumeCompletes(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "harness-edge approve k g1", "run", writeTask(t, dir, "k.yaml", strings.ReplaceAll(gatedTask, "%s", "k")))
	expectIn(t, db, ExitOK, "rejected: not today", "reject", "k", "--reason", "not today")
	expectIn(t, db, ExitOK, "ship (critical)  A      ready", "plan", "k")
	change := writeTask(t, dir, "skip.yaml", "skip: [ship]\n")
	out := expectIn(t, db, ExitOK, "replanned: skip ship", "replan", "k", change, "--by", "ada", "--reason", "shipped by hand")
	if !strings.Contains(out, "ship (critical)  A      completed") || !strings.Contains(out, "report           A      ready") {
		t.Fatalf("replan's plan:\n%s", out)
	}
	expectIn(t, db, ExitOK, "replanned (skip ship) by ada: shipped by hand", "show", "k")
	expectIn(t, db, ExitOK, "harness k: completed", "resume", "k")
	if fileExists(filepath.Join(dir, "ws", "shipped.txt")) {
		t.Fatal("the skipped step ran")
	}
	st := storeState(t, db, "k")
	if deref(st.Plan.Steps[1].Output) != "(skipped by ada: shipped by hand)" || st.Plan.Steps[1].Attempts != 0 {
		t.Fatalf("skipped step: %+v", st.Plan.Steps[1])
	}
	expectIn(t, db, ExitOK, "replan  3 steps  by ada  (shipped by hand)  skip ship", "events", "k")
	expectIn(t, db, ExitError, "has completed", "replan", "k", change)
}

// A rejected step is replaced (new actions, no longer critical) and resume runs the new step;
// a replan with problems names every one with its line, and changes nothing.
func TestRejectReplanReplaceRunsTheNewStep(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "harness-edge approve p g1", "run", writeTask(t, dir, "p.yaml", strings.ReplaceAll(gatedTask, "%s", "p")))
	expectIn(t, db, ExitOK, "rejected", "reject", "p", "--reason", "ship to staging instead")
	before := storeState(t, db, "p")
	bad := writeTask(t, dir, "bad.yaml", `skip: [prep, nope]
replace:
  ship: {agent: Z}
insert:
  - {id: report, description: again, agent: A}
  - {id: loop, description: a cycle, agent: A, dependsOn: [loop2]}
  - {id: loop2, description: a cycle, agent: A, dependsOn: [loop]}
dependsOn:
  report: [ghost]
`)
	out := expectIn(t, db, ExitError, "the plan change is not valid", "replan", "p", bad)
	for _, want := range []string{
		"bad.yaml:1: skip[0]: step prep has completed: it cannot be changed",
		`bad.yaml:1: skip[1]: "nope" is not a step of the plan`,
		`bad.yaml:3: replace.ship.agent: "Z" is not an agent of the task`,
		`bad.yaml:5: insert[0].id: "report" is already a step of the plan`,
		`bad.yaml:9: dependsOn.report: "ghost" is not a step of the plan`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != 6 {
		t.Errorf("want the 5 problems, each once:\n%s", out)
	}
	cycle := writeTask(t, dir, "cycle.yaml", `insert:
  - {id: loop, description: a cycle, agent: A, dependsOn: [loop2]}
  - {id: loop2, description: a cycle, agent: A, dependsOn: [loop]}
`)
	expectIn(t, db, ExitError, "cycle.yaml:2: insert[0].dependsOn: dependency cycle: loop -> loop2 -> loop", "replan", "p", cycle)
	if after := storeState(t, db, "p"); !sameState(before, after) {
		t.Fatal("a refused replan changed the harness")
	}

	good := writeTask(t, dir, "good.yaml", `replace:
  ship:
    description: ship to staging
    critical: false
    actions:
      - {tool: write_file, args: {path: staging.txt, content: "staged"}}
      - {output: staged}
insert:
  - {id: check, description: check staging, agent: A, dependsOn: [ship], actions: [{output: checked}]}
dependsOn:
  report: [check]
`)
	expectIn(t, db, ExitOK, "insert check after [ship]; report depends on [check]", "replan", "p", good, "--reason", "staging first")
	expectIn(t, db, ExitOK, "harness p: completed", "resume", "p")
	st := storeState(t, db, "p")
	var outs []string
	for _, s := range st.Plan.Steps {
		outs = append(outs, s.ID+"="+strings.ReplaceAll(deref(s.Output), "\n", "|"))
	}
	if got := strings.Join(outs, " "); !strings.Contains(got, "ship=") || !strings.HasSuffix(deref(st.Plan.Steps[1].Output), "staged") ||
		!strings.Contains(got, "check=checked") || !strings.Contains(got, "report=reported") {
		t.Fatalf("outputs: %s", got)
	}
	if !fileExists(filepath.Join(dir, "ws", "staging.txt")) || fileExists(filepath.Join(dir, "ws", "shipped.txt")) {
		t.Fatal("the replaced step did not run as replaced")
	}
	// The stored task has the new actions: a fresh process reads it back.
	expectIn(t, db, ExitOK, "check", "plan", "p", "--json")
}

// A failed harness is fixed with a replan (the failing step's actions replaced), retried and
// resumed to completion, its history kept.
func TestReplanThenRetryFixesAFailedHarness(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, "f.yaml", strings.ReplaceAll(strings.ReplaceAll(flakyTask, "times: 1", "times: 0"), "%s", "f")))
	fix := writeTask(t, dir, "fix.yaml", "replace:\n  build: {actions: [{output: built with clang}]}\n")
	expectIn(t, db, ExitOK, "it is failed: run it again with `harness-edge retry f`", "replan", "f", fix)
	expectIn(t, db, ExitOK, "it is paused", "retry", "f")
	expectIn(t, db, ExitOK, "harness f: completed", "resume", "f")
	st := storeState(t, db, "f")
	if b := st.Plan.Steps[1]; b.Attempts != 2 || deref(b.Output) != "built with clang" || len(st.ToolCallHistory) != 1 {
		t.Fatalf("build %+v, %d tool calls", b, len(st.ToolCallHistory))
	}
}

// A replan that inserts 30,000 steps is summed up in a line, wherever it is told: the command's
// output (which counts the plan's steps rather than printing them), the status reason and the
// course event name ten inserts and count the rest. The plan holds every step.
func TestReplanThatInsertsThousandsOfStepsNamesTenAndCountsTheRest(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, "f.yaml", strings.ReplaceAll(flakyTask, "%s", "f")))
	var change strings.Builder
	change.WriteString("insert:\n")
	for i := range 30000 {
		fmt.Fprintf(&change, "  - {id: n%05d, description: more, agent: A, dependsOn: [ship]}\n", i)
	}
	const summary = "insert n00000 after [ship]; insert n00001 after [ship]; insert n00002 after [ship]; insert n00003 after [ship]; " +
		"insert n00004 after [ship]; insert n00005 after [ship]; insert n00006 after [ship]; insert n00007 after [ship]; " +
		"insert n00008 after [ship]; insert n00009 after [ship] and 29,990 more inserts"
	out := expectIn(t, db, ExitOK, "harness f: replanned: "+summary+"\n"+
		"the plan has 30,003 steps (1 completed, 1 failed, 30,001 blocked): `harness-edge plan f` lists them\n",
		"replan", "f", writeTask(t, dir, "big.yaml", change.String()), "--by", "ada")
	if len(out) > 2000 {
		t.Fatalf("replan printed %d bytes:\n%.3000s", len(out), out)
	}
	st := storeState(t, db, "f")
	if len(st.Plan.Steps) != 30003 {
		t.Fatalf("%d steps in the plan, want 30003", len(st.Plan.Steps))
	}
	if want := "replanned (" + summary + ") by ada; retry it to run the new plan (`harness-edge retry f`)"; st.StatusReason != want {
		t.Fatalf("status reason (%d bytes): %.300s", len(st.StatusReason), st.StatusReason)
	}
	var course []event.Event
	for _, e := range eventsOf(t, db, "f") {
		if e.Type == event.Course {
			course = append(course, e)
		}
	}
	if len(course) != 1 || course[0].Message != summary || course[0].Steps != 30003 {
		t.Fatalf("course events: %+.300v", course)
	}
}

// retry says what it does with the plan: after a replan replaced the step that failed, there
// is no failed step left and the plan is kept (resume runs the replaced step, not a new plan);
// a harness that failed before it had a plan plans again on resume.
func TestRetryAfterAReplanSaysThePlanIsKept(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, "f.yaml", strings.ReplaceAll(strings.ReplaceAll(flakyTask, "times: 1", "times: 0"), "%s", "f")))
	expectIn(t, db, ExitOK, "it is failed", "replan", "f", writeTask(t, dir, "fix.yaml", "replace:\n  build: {actions: [{output: built with clang}]}\n"))
	out := expectIn(t, db, ExitOK, "harness f: retry: no failed step: its plan is kept as it is, and resume runs the steps not done yet; it is paused", "retry", "f")
	if strings.Contains(out, "plans again") {
		t.Fatalf("retry says the harness plans again:\n%s", out)
	}
	expectIn(t, db, ExitOK, "retry (no failed step; the plan is kept) by", "show", "f")
	expectIn(t, db, ExitOK, "harness f: completed", "resume", "f")
	if st := storeState(t, db, "f"); st.Plan.Steps[0].Attempts != 1 || deref(st.Plan.Steps[1].Output) != "built with clang" {
		t.Fatalf("the plan was not kept: %+v", st.Plan.Steps)
	}

	expectIn(t, db, ExitError, "the task declares no plan", "run", writeTask(t, dir, "np.yaml", "id: np\nagent: A\nworkspace: ./ws\nagents:\n  A: {driver: script, script: {steps: {\"*\": [{output: done}]}}}\n"))
	expectIn(t, db, ExitOK, "harness np: retry: it has no plan yet: resume plans again; it is paused", "retry", "np")
}

// retry --step of a step that has not failed is refused, changing nothing, with what takes the
// harness on instead, and that way does: the failed step a blocked one waits on; after a replan
// replaced the failed step, a retry of the harness (without --step); then resume.
func TestRetryOfAStepThatHasNotFailedSaysWhatTakesTheHarnessOn(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, "f.yaml", strings.ReplaceAll(strings.ReplaceAll(flakyTask, "times: 1", "times: 0"), "%s", "f")))
	expectIn(t, db, ExitError, "harness f: step ship is blocked, not failed: nothing to retry; it waits on failed step build: "+
		"retry that one (`harness-edge retry f --step build`), or every failed step (`harness-edge retry f`)", "retry", "f", "--step", "ship")
	expectIn(t, db, ExitOK, "it is failed", "replan", "f", writeTask(t, dir, "fix.yaml", "replace:\n  build: {actions: [{output: built with clang}]}\n"))
	replanned := storeState(t, db, "f")
	for _, step := range []string{"build", "ship"} {
		expectIn(t, db, ExitError, "harness f: step "+step+" is ", "retry", "f", "--step", step)
		expectIn(t, db, ExitError, ", not failed: nothing to retry; the harness has failed with no failed step left (a replan replaced or skipped the one that failed, or it was stopped): "+
			"`harness-edge retry f` (without --step) makes it paused, keeping its plan, and `harness-edge resume f` then runs the steps not done yet", "retry", "f", "--step", step)
	}
	if !sameState(replanned, storeState(t, db, "f")) {
		t.Fatal("a refused retry changed the harness")
	}
	expectIn(t, db, ExitOK, "no failed step: its plan is kept as it is", "retry", "f")
	expectIn(t, db, ExitError, "step build is ready, not failed: nothing to retry; nothing has failed: `harness-edge resume f` runs it", "retry", "f", "--step", "build")
	expectIn(t, db, ExitOK, "harness f: completed", "resume", "f")
}

// stop of a failed harness says it has stopped already and what takes it on (retry, replan,
// rollback, delete), not that it can go nowhere; the retry it names does take it on.
func TestStopOfAFailedHarnessSaysItHasStoppedAndWhatTakesItOn(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, "f.yaml", fmt.Sprintf(flakyTask, "f")))
	out := expectIn(t, db, ExitError, "harness f is failed: it has stopped already; `harness-edge retry f` makes it paused, to resume "+
		"(after `harness-edge replan f FILE` when its plan needs a change); `harness-edge rollback f --to NAME|SEQ` takes it back to a checkpoint; "+
		"`harness-edge delete f` removes it", "stop", "f")
	if strings.Contains(out, "none") || strings.Contains(out, "final") {
		t.Fatalf("stop says the failed harness can go nowhere:\n%s", out)
	}
	expectIn(t, db, ExitError, "harness f is failed: it cannot go to running: it has stopped; `harness-edge retry f`", "resume", "f")
	expectIn(t, db, ExitOK, "step build ready again", "retry", "f")
	expectIn(t, db, ExitOK, "harness f: completed", "resume", "f")
	expectIn(t, db, ExitError, "harness f is completed: it has stopped already; its plan is done: `harness-edge rollback f --to NAME|SEQ`", "stop", "f")
}

// A checkpoint named while the harness waits at a gate is rolled back to after it completed:
// resume then asks the gate again and, approved, runs the steps after the point again, to the
// same outputs (real processes, a store on disk). A recent checkpoint is reached by number;
// refusals name what is wrong and change nothing.
func TestRollbackToANamedCheckpointRunsTheStepsAfterItAgain(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "approve b g1", "run", writeTask(t, dir, "b.yaml", strings.ReplaceAll(gatedTask, "%s", "b")))
	expectIn(t, db, ExitOK, "named before-ship (paused, 1/3 steps done", "checkpoint", "b", "--name", "before-ship")
	expectIn(t, db, ExitError, "already has a checkpoint of that name", "checkpoint", "b", "--name", "before-ship")
	expectIn(t, db, ExitError, "invalid checkpoint name", "checkpoint", "b", "--name", "12")
	expectIn(t, db, ExitOK, "approved", "approve", "b")
	expectIn(t, db, ExitOK, "harness b: completed", "resume", "b")
	first := storeState(t, db, "b")

	expectIn(t, db, ExitError, `no checkpoint named "after"`, "rollback", "b", "--to", "after")
	expectIn(t, db, ExitError, "holds checkpoints", "rollback", "b", "--to", "999")
	if after := storeState(t, db, "b"); !sameState(first, after) {
		t.Fatal("a refused rollback changed the harness")
	}
	out := expectIn(t, db, ExitOK, "before-ship", "checkpoints", "b")
	if !strings.Contains(out, "recent: checkpoints") {
		t.Fatalf("checkpoints:\n%s", out)
	}
	expectIn(t, db, ExitOK, `rolled back to "before-ship" (1/3 steps done); it is paused`, "rollback", "b", "--to", "before-ship", "--reason", "redo the release")
	expectIn(t, db, ExitOK, "ship (critical)  A      ready", "plan", "b")
	expectIn(t, db, ExitWaiting, "approve b g1", "resume", "b")
	expectIn(t, db, ExitOK, "approved", "approve", "b")
	expectIn(t, db, ExitOK, "harness b: completed", "resume", "b")
	again := storeState(t, db, "b")
	for i := range first.Plan.Steps {
		if a, b := first.Plan.Steps[i], again.Plan.Steps[i]; deref(a.Output) != deref(b.Output) || a.Attempts != b.Attempts {
			t.Fatalf("step %s: %q (attempt %d) then %q (attempt %d)", a.ID, deref(a.Output), a.Attempts, deref(b.Output), b.Attempts)
		}
	}
	if len(again.ToolCallHistory) != len(first.ToolCallHistory) || again.CheckpointCount <= first.CheckpointCount {
		t.Fatalf("history %d then %d calls, checkpoints %d then %d", len(first.ToolCallHistory), len(again.ToolCallHistory), first.CheckpointCount, again.CheckpointCount)
	}
	var sawNamed, sawRollback bool
	for _, e := range eventsOf(t, db, "b") {
		sawNamed = sawNamed || e.Type == event.Course && e.Action == harness.CourseCheckpoint
		sawRollback = sawRollback || e.Type == event.Course && e.Action == harness.CourseRollback && e.Reason == "redo the release"
	}
	if !sawNamed || !sawRollback {
		t.Fatalf("course events: named %v, rollback %v", sawNamed, sawRollback)
	}
	// A recent checkpoint by number: the oldest the chain holds.
	code, js := binary(t, db, "checkpoints", "b", "--json")
	var l control.Checkpoints
	if code != ExitOK || json.Unmarshal([]byte(js), &l) != nil || l.FirstSeq == 0 || l.FirstSeq > l.HeadSeq {
		t.Fatalf("checkpoints --json: %d %s", code, js)
	}
	expectIn(t, db, ExitOK, fmt.Sprintf("rolled back to checkpoint %d", l.FirstSeq), "rollback", "b", "--to", fmt.Sprint(l.FirstSeq))
	// The answer's "to" names the checkpoint as a request would: the number, not a sentence.
	if code, js = binary(t, db, "checkpoints", "b", "--json"); code != ExitOK || json.Unmarshal([]byte(js), &l) != nil {
		t.Fatalf("checkpoints --json: %d %s", code, js)
	}
	code, js = binary(t, db, "rollback", "b", "--to", fmt.Sprint(l.FirstSeq), "--json")
	var res harness.RollbackResult
	if code != ExitOK || json.Unmarshal([]byte(js), &res) != nil || res.To != fmt.Sprint(l.FirstSeq) {
		t.Fatalf("rollback --json: %d %s", code, js)
	}
	expectIn(t, db, ExitOK, "", "verify")
}

// A named checkpoint keeps the task as it was: rolled back to a point before a replan that
// replaced a step's actions, the harness runs the step's original actions again.
func TestRollbackBeforeAReplanRunsTheOriginalStep(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "approve o g1", "run", writeTask(t, dir, "o.yaml", strings.ReplaceAll(gatedTask, "%s", "o")))
	expectIn(t, db, ExitOK, "named pre", "checkpoint", "o", "--name", "pre")
	expectIn(t, db, ExitOK, "rejected", "reject", "o", "--reason", "staging first")
	change := writeTask(t, dir, "c.yaml", "replace:\n  ship: {critical: false, actions: [{tool: write_file, args: {path: staging.txt, content: s}}, {output: staged}]}\n")
	expectIn(t, db, ExitOK, "replanned", "replan", "o", change)
	expectIn(t, db, ExitOK, "harness o: completed", "resume", "o")
	if !fileExists(filepath.Join(dir, "ws", "staging.txt")) || fileExists(filepath.Join(dir, "ws", "shipped.txt")) {
		t.Fatal("the replaced step did not run as replaced")
	}
	expectIn(t, db, ExitOK, `rolled back to "pre"`, "rollback", "o", "--to", "pre")
	expectIn(t, db, ExitWaiting, "approve o g1", "resume", "o")
	expectIn(t, db, ExitOK, "approved", "approve", "o")
	expectIn(t, db, ExitOK, "harness o: completed", "resume", "o")
	if !fileExists(filepath.Join(dir, "ws", "shipped.txt")) {
		t.Fatal("after the rollback the step ran the replan's actions, not its own")
	}
	if st := storeState(t, db, "o"); !strings.HasSuffix(deref(st.Plan.Steps[1].Output), "shipped") {
		t.Fatalf("ship's output: %q", deref(st.Plan.Steps[1].Output))
	}
}

// serve --retain prunes the completed and failed harnesses older than the retention, on start
// and then regularly, and leaves the others (a real daemon process, a store on disk).
func TestDaemonRetentionPrunesOldHarnesses(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitOK, "completed", "run", writeTask(t, dir, "old.yaml", bulkyTask("old", 3, "")))
	expectIn(t, db, ExitError, "broken", "run", writeTask(t, dir, "bad.yaml", bulkyTask("bad", 3, "fail")))
	expectIn(t, db, ExitWaiting, "approve waits g1", "run", writeTask(t, dir, "waits.yaml", bulkyTask("waits", 3, "gate")))
	expectIn(t, db, ExitUsage, "--retain", "serve", "--retain", "soon")
	time.Sleep(1500 * time.Millisecond)
	d := startDaemon(t, db, "--retain", "1s")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, out, _ := run(t, "--store", db, "ls", "--json")
		if code == ExitOK && !strings.Contains(out, `"old"`) && !strings.Contains(out, `"bad"`) {
			if !strings.Contains(out, `"waits"`) {
				t.Fatalf("retention pruned the harness that waits for a human:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention did not prune:\n%s\n%s", out, d.log)
		}
	}
	expectIn(t, db, ExitOK, "", "verify")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(d.log.String(), "retention: pruned"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not log the prune:\n%s", d.log)
		}
	}
}

// Without $USER (cron, a systemd unit, `env -i`), who changed a harness's course is the name of
// the process's user, not "unknown": the default of --by is recorded with the retry.
func TestByIsTheUsersNameWhenUSERIsUnset(t *testing.T) {
	t.Setenv("USER", "")
	want := fmt.Sprintf("uid %d", os.Getuid())
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil && u.Username != "" {
		want = u.Username
	}
	if got := whoAmI(); got != want {
		t.Fatalf("whoAmI without $USER: %q, want %q", got, want)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, "f.yaml", strings.ReplaceAll(flakyTask, "%s", "f")))
	expectIn(t, db, ExitOK, "step build ready again", "retry", "f")
	expectIn(t, db, ExitOK, "retry (step build attempt 2; unblocked ship) by "+want+"; resume to run it", "show", "f")
	var by []string
	for _, e := range eventsOf(t, db, "f") {
		if e.Type == event.Course {
			by = append(by, e.By)
		}
	}
	if len(by) != 1 || by[0] != want {
		t.Fatalf("the retry's course event is by %q, want %q", by, want)
	}
}

// A user with no name (a uid that has no line in /etc/passwd) is "uid N".
func TestByIsTheUIDOfAUserWithNoName(t *testing.T) {
	want := fmt.Sprintf("uid %d", os.Getuid())
	for _, current := range []func() (*user.User, error){
		func() (*user.User, error) { return nil, user.UnknownUserIdError(os.Getuid()) },
		func() (*user.User, error) { return &user.User{Uid: strconv.Itoa(os.Getuid()), Username: " "}, nil },
	} {
		if got := userName(current); got != want {
			t.Errorf("userName: %q, want %q", got, want)
		}
	}
	if got := userName(func() (*user.User, error) { return &user.User{Username: "ada"}, nil }); got != "ada" {
		t.Errorf("userName of ada: %q", got)
	}
}

// A reason or a name over its limit sent to the API is refused with 400 saying which and by how
// much, and changes nothing (a 25 MB reason was a 500: its event was over the event limit); a
// reason at the limit is taken.
func TestTheAPIRefusesAReasonOrANameOverItsLimit(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, "t.yaml", strings.ReplaceAll(flakyTask, "%s", "w")))
	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	_, failed := d.http("GET", "/v1/harnesses/w", token, nil)
	body := func(by, reason string, more ...string) []byte {
		m := map[string]string{"reason": reason}
		if by != "" {
			m["by"] = by
		}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		b, _ := json.Marshal(m)
		return b
	}
	const want = "the reason is 65537 bytes, over the 65536-byte limit"
	long := strings.Repeat("r", control.MaxReason+1)
	for path, b := range map[string][]byte{
		"/v1/harnesses/w/retry":    body("ann", long),
		"/v1/harnesses/w/replan":   body("ann", long, "change", "skip: [ship]\n"),
		"/v1/harnesses/w/rollback": body("ann", long, "to", "1"),
		"/v1/harnesses/w/reject":   body("", long),
	} {
		if code, resp := d.http("POST", path, token, b); code != 400 || !strings.Contains(resp, want) {
			t.Fatalf("%s with a long reason: %d %s\nwant 400 %q", path, code, resp, want)
		}
	}
	if code, resp := d.http("POST", "/v1/harnesses/w/retry", token, body(strings.Repeat("b", control.MaxBy+1), "why")); code != 400 || !strings.Contains(resp, `by\" is 257 bytes, over the 256-byte limit`) {
		t.Fatalf("retry by a long name: %d %s", code, resp)
	}
	if _, after := d.http("GET", "/v1/harnesses/w", token, nil); after != failed || !strings.Contains(after, `"status": "failed"`) {
		t.Fatalf("a refused request changed the harness:\n%.500s\n%.500s", failed, after)
	}
	if code, resp := d.http("POST", "/v1/harnesses/w/retry", token, body("ann", strings.Repeat("r", control.MaxReason))); code != 200 {
		t.Fatalf("retry with a reason at the limit: %d %s", code, resp)
	}
}

// The command line's reject keeps to the same limits as the API: without a daemon a reason
// over 64 KiB is refused (it was recorded whole), and a reason or a name that is not UTF-8 is
// refused naming the byte (it failed at the checkpoint, "statusReason is not valid UTF-8");
// through a daemon the command line refuses such text before it is sent (JSON would carry the
// byte as U+FFFD, and the harness would record a reason that is not the one given). Neither
// changes the harness.
func TestAReasonOverItsLimitOrNotUTF8IsRefusedWithOrWithoutADaemon(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "harness-edge approve k g1", "run", writeTask(t, dir, "k.yaml", strings.ReplaceAll(gatedTask, "%s", "k")))
	waiting := storeState(t, db, "k")
	long := strings.Repeat("r", control.MaxReason+1)
	expectIn(t, db, ExitError, "the reason is 65537 bytes, over the 65536-byte limit", "reject", "k", "g1", "--reason", long)
	skip := writeTask(t, dir, "skip.yaml", "skip: [ship]\n")
	refusals := func() {
		t.Helper()
		expectIn(t, db, ExitError, "the reason is not UTF-8: the byte 0xE9 at byte offset 3 is not valid UTF-8", "reject", "k", "g1", "--reason", "caf\xe9")
		expectIn(t, db, ExitError, `"by" is not UTF-8: the byte 0xE9 at byte offset 3 is not valid UTF-8`, "replan", "k", skip, "--by", "Jos\xe9")
	}
	refusals()
	if after := storeState(t, db, "k"); !sameState(waiting, after) {
		t.Fatal("a refused reject changed the harness")
	}
	startDaemon(t, db)
	refusals()
	expectIn(t, db, ExitOK, "waiting for a human: gate g1 before step ship", "show", "k")
	expectIn(t, db, ExitOK, "rejected: not today", "reject", "k", "g1", "--reason", "not today")
	expectIn(t, db, ExitOK, "ship (critical)  A      ready", "plan", "k")
}

// reject says back a long reason as show does: on one line, cut at 300 bytes with its length
// (a reason may be 64 KiB); run says a long error of a failed step so too, not all of it twice.
func TestRejectAndRunSayALongReasonCut(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "harness-edge approve k g1", "run", writeTask(t, dir, "k.yaml", strings.ReplaceAll(gatedTask, "%s", "k")))
	reason := strings.Repeat("not today, the staging run is red\n", control.MaxReason/34)
	out := expectIn(t, db, ExitOK, fmt.Sprintf("... (%d bytes in all)", len(reason)), "reject", "k", "g1", "--reason", reason)
	if first, _, _ := strings.Cut(out, "\n"); len(out) > 1000 || !strings.Contains(first, `red\nnot today`) {
		t.Errorf("reject printed %d bytes:\n%.1500s", len(out), out)
	}
	long := strings.Repeat("linker error ", 20_000)
	failing := "id: f\nprompt: p\nagent: A\nagents:\n  A:\n    driver: script\n    script:\n      plan: [{id: s, description: s, agent: A}]\n" +
		"      steps:\n        s: [{fail: permanent, message: \"" + long + "\"}]\n"
	out = expectIn(t, db, ExitError, fmt.Sprintf("(%d bytes in all)", len("step s failed: ")+len(long)), "run", writeTask(t, dir, "f.yaml", failing))
	if len(out) > 2000 {
		t.Errorf("run printed %d bytes:\n%.1500s", len(out), out)
	}
}
