package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/internal/openaitest"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// ownerTask: an openai agent P that owns the plan and runs its steps; ship is critical, so at
// autonomy 3 it waits for a human.
const ownerTask = `id: %s
prompt: Release the new version.
agent: P
autonomy: 3
workspace: ./ws-%s
agents:
  P:
    driver: openai
    endpoint: "%s"
    model: fake-model
    tools: [read_file]
    requestTimeout: 20s
plan:
  - {id: prep, description: prepare the release, agent: P}
  - {id: ship, description: ship to production, agent: P, dependsOn: [prep], critical: true}
  - {id: report, description: write the release report, agent: P, dependsOn: [ship]}
`

// stagingChange is a valid change: ship goes to staging (no longer critical) and a critical
// check of staging comes before the report.
const stagingChange = `{"replace": {"ship": {"description": "ship to staging", "critical": false}},
 "insert": [{"id": "check-staging", "description": "check staging", "agent": "P", "dependsOn": ["ship"], "critical": true}],
 "dependsOn": {"report": ["check-staging"]}}`

// badChange names an unknown agent; cycleChange makes a dependency cycle.
const (
	badChange   = `{"insert": [{"id": "a", "description": "x", "agent": "Z"}]}`
	cycleChange = `{"insert": [{"id": "a", "description": "x", "agent": "P", "dependsOn": ["b"]}, {"id": "b", "description": "y", "agent": "P", "dependsOn": ["a"]}]}`
)

// modelServer is the fake model: a replan request (the one without tools that asks for a plan
// change) gets the next of changes (the last one again when they run out); a step gets a final
// answer naming what it was asked to do.
func modelServer(changes ...string) *openaitest.Server {
	srv := openaitest.New()
	var mu sync.Mutex
	srv.Respond = func(r openaitest.Request) openaitest.Reply {
		if len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Text(), "You change the plan") {
			mu.Lock()
			defer mu.Unlock()
			c := changes[0]
			if len(changes) > 1 {
				changes = changes[1:]
			}
			return openaitest.Reply{Content: "Here is the change:\n```json\n" + c + "\n```"}
		}
		asked := r.Messages[len(r.Messages)-1].Text()
		for _, what := range []string{"ship to staging", "ship to production", "check staging", "prepare the release", "write the release report"} {
			if strings.Contains(asked, what) {
				return openaitest.Reply{Content: "done: " + what}
			}
		}
		return openaitest.Reply{Content: "done"}
	}
	return srv
}

// replanRequests are the replan requests the server got.
func replanRequests(srv *openaitest.Server) []openaitest.Request {
	var out []openaitest.Request
	for _, r := range srv.Requests() {
		if len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Text(), "You change the plan") {
			out = append(out, r)
		}
	}
	return out
}

func stepIDs(st *statefmt.HarnessState) string {
	var ids []string
	for _, s := range st.Plan.Steps {
		ids = append(ids, s.ID+":"+string(s.Status))
	}
	return strings.Join(ids, " ")
}

// An openai owner replans by itself after a human rejects a gate (real processes, a store on
// disk, the fake model over HTTP): resume sends the model the rejected step, the human's reason
// and the plan; its change is applied (a course event by the agent with the human's reason);
// the replaced step runs as replaced; the next gate names the replan and `show` shows the new
// plan; approving it completes the harness.
func TestOwnerAgentReplansAfterARejectedGate(t *testing.T) {
	srv := modelServer(stagingChange)
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	task := writeTask(t, dir, "o.yaml", fmt.Sprintf(ownerTask, "o", "o", srv.Endpoint()))
	expectIn(t, db, ExitWaiting, "harness-edge approve o g1", "run", task)
	expectIn(t, db, ExitOK, "replans by itself", "reject", "o", "--reason", "production is frozen this week")
	if n := len(replanRequests(srv)); n != 0 {
		t.Fatalf("%d replan requests before resume", n)
	}
	out := expectIn(t, db, ExitWaiting, "check-staging", "resume", "o")
	if !strings.Contains(out, "the plan changed: agent:P replanned") {
		t.Errorf("the next gate does not name the replan:\n%s", out)
	}
	reqs := replanRequests(srv)
	if len(reqs) != 1 {
		t.Fatalf("%d replan requests, want 1", len(reqs))
	}
	asked := reqs[0].Messages[1].Text()
	for _, want := range []string{"production is frozen this week", "rejected step ship (gate g1)", `"id": "report"`, "Release the new version"} {
		if !strings.Contains(asked, want) {
			t.Errorf("the replan request lacks %q:\n%s", want, asked)
		}
	}
	show := expectIn(t, db, ExitOK, "check-staging (critical)", "show", "o")
	for _, want := range []string{"done: ship to staging", "replan  ship", "agent:P replanned (replace ship (description, critical false); insert check-staging"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	expectIn(t, db, ExitOK, "replan  4 steps  by agent:P  (production is frozen this week)  replace ship", "events", "o")
	expectIn(t, db, ExitOK, "approved", "approve", "o")
	expectIn(t, db, ExitOK, "harness o: completed", "resume", "o")
	st := storeState(t, db, "o")
	if got := stepIDs(st); got != "prep:completed ship:completed report:completed check-staging:completed" {
		t.Fatalf("plan after: %s", got)
	}
	if n := len(replanRequests(srv)); n != 1 {
		t.Fatalf("the owner was asked to replan %d times, want once", n)
	}
	expectIn(t, db, ExitOK, "every chain replays", "verify")
}

// A model that first answers invalid changes (an unknown agent, then a cycle) is told what is
// wrong each time, and its valid third answer is applied, and only it.
func TestOwnerAgentsInvalidChangesAreToldAndOnlyTheValidOneApplied(t *testing.T) {
	srv := modelServer(badChange, cycleChange, stagingChange)
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "approve v g1", "run", writeTask(t, dir, "v.yaml", fmt.Sprintf(ownerTask, "v", "v", srv.Endpoint())))
	expectIn(t, db, ExitOK, "rejected", "reject", "v", "--reason", "not to production")
	expectIn(t, db, ExitWaiting, "check-staging", "resume", "v")
	reqs := replanRequests(srv)
	if len(reqs) != 3 {
		t.Fatalf("%d replan requests, want 3", len(reqs))
	}
	for i, want := range []string{`insert[0].agent: "Z" is not an agent of the task`, "insert[0].dependsOn: dependency cycle: a -> b -> a"} {
		told := reqs[i+1].Messages[len(reqs[i+1].Messages)-1].Text()
		if !strings.Contains(told, want) || !strings.Contains(told, "the plan change is not valid") {
			t.Errorf("answer %d: the model was not told %q:\n%s", i+1, want, told)
		}
	}
	st := storeState(t, db, "v")
	if got := stepIDs(st); !strings.Contains(got, "check-staging") || strings.Contains(got, " a:") || strings.Contains(got, " b:") {
		t.Fatalf("plan: %s", got)
	}
	s, err := store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := courseEvents(s, "v", harness.CourseReplan)
	s.Close()
	if n != 1 {
		t.Fatalf("%d replan course events, want 1", n)
	}
}

// A model that only answers invalid changes gets ReplanTries answers, then the harness waits
// at a replan gate saying so, with its plan and history as they were; approving that gate
// asks the human about the step again.
func TestOwnerAgentWithNoValidChangeStopsAtAGate(t *testing.T) {
	srv := modelServer(badChange)
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "approve n g1", "run", writeTask(t, dir, "n.yaml", fmt.Sprintf(ownerTask, "n", "n", srv.Endpoint())))
	expectIn(t, db, ExitOK, "rejected", "reject", "n", "--reason", "not to production")
	before := storeState(t, db, "n")
	out := expectIn(t, db, ExitWaiting, "agent:P could not replan after the rejection of gate g1 before step ship", "resume", "n")
	if !strings.Contains(out, "no valid plan change after 3 answers") {
		t.Errorf("the gate does not say why:\n%s", out)
	}
	if n := len(replanRequests(srv)); n != harness.ReplanTries {
		t.Fatalf("%d replan requests, want %d", n, harness.ReplanTries)
	}
	after := storeState(t, db, "n")
	if stepIDs(after) != stepIDs(before) || len(after.ToolCallHistory) != len(before.ToolCallHistory) {
		t.Fatalf("plan changed: %s -> %s", stepIDs(before), stepIDs(after))
	}
	for i, s := range before.Plan.Steps {
		if a := after.Plan.Steps[i]; a.Description != s.Description || deref(a.Output) != deref(s.Output) || a.Attempts != s.Attempts {
			t.Fatalf("step %s changed: %+v -> %+v", s.ID, s, a)
		}
	}
	if after.Budget == nil || after.Budget.TokensUsed <= before.Budget.TokensUsed {
		t.Fatalf("the replan answers were not charged to the token budget: %+v -> %+v", before.Budget, after.Budget)
	}
	g := after.Gates[len(after.Gates)-1]
	if len(after.Gates) != 2 || after.Gates[0].Status != statefmt.GateRejected || g.Kind != harness.GateReplan || g.Status != statefmt.GatePending {
		t.Fatalf("gates: %+v", after.Gates)
	}
	expectIn(t, db, ExitOK, "approved", "approve", "n", g.ID)
	expectIn(t, db, ExitWaiting, "gate g1 rejected it: not to production", "resume", "n")
	if n := len(replanRequests(srv)); n != harness.ReplanTries {
		t.Fatalf("%d replan requests after the replan gate was decided, want %d", n, harness.ReplanTries)
	}
}

// SIGKILL at random instants while an owner agent replans on resume and the harness goes on
// (real processes, a store on disk): after each kill verify passes and the change is whole
// (a course event, the inserted step, the replaced step, the replan gate) or absent.
func TestKill9WhileTheOwnerAgentReplans(t *testing.T) {
	srv := modelServer(stagingChange)
	defer srv.Close()
	dir := t.TempDir()
	template := filepath.Join(dir, "template")
	expectIn(t, template, ExitWaiting, "approve k g1", "run", writeTask(t, dir, "k.yaml", fmt.Sprintf(ownerTask, "k", "k", srv.Endpoint())))
	expectIn(t, template, ExitOK, "rejected", "reject", "k", "--reason", "not to production")
	// waitReplan waits until the server has had more than n replan requests and says when.
	waitReplan := func(n int) time.Time {
		for deadline := time.Now().Add(20 * time.Second); len(replanRequests(srv)) <= n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the owner was not asked to replan")
			}
		}
		return time.Now()
	}
	// How long a resume goes on after the model is asked (the answer, the change applied, the
	// replaced step, the next gate): the kills are spread over that time.
	measure := filepath.Join(dir, "measure")
	copyTree(t, template, measure)
	cmd := child("--store", measure, "resume", "k")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	asked := waitReplan(len(replanRequests(srv)))
	_ = cmd.Wait()
	tail := time.Since(asked)
	if !strings.Contains(stepIDs(storeState(t, measure, "k")), "check-staging") {
		t.Fatal("the measured resume did not replan")
	}
	runs := 12
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	applied := 0
	for i := range runs {
		db := filepath.Join(dir, fmt.Sprintf("run%d", i))
		copyTree(t, template, db)
		cmd := child("--store", db, "resume", "k")
		n := len(replanRequests(srv))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitReplan(n)
		time.Sleep(time.Duration(r.Int64N(int64(tail) / 2)))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if code, out := binary(t, db, "verify"); code != ExitOK {
			t.Fatalf("run %d: verify exits %d:\n%s", i, code, out)
		}
		s, err := store.OpenStore(db, store.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Restore("k")
		if err != nil {
			t.Fatal(err)
		}
		events := courseEvents(s, "k", harness.CourseReplan)
		s.Close()
		inserted := len(st.Plan.Steps) == 4 && st.Plan.Steps[3].ID == "check-staging"
		replaced := st.Plan.Steps[1].Description == "ship to staging"
		gate := false
		for _, g := range st.Gates {
			gate = gate || g.Kind == harness.GateReplan
		}
		switch {
		case inserted && replaced && gate && events == 1:
			applied++
		case !inserted && !replaced && !gate && events == 0 && len(st.Plan.Steps) == 3:
		default:
			t.Fatalf("run %d: the replan is half there: inserted %v, replaced %v, gate %v, %d course events", i, inserted, replaced, gate, events)
		}
		// Whatever the kill left, resuming ends at the check of staging.
		expectIn(t, db, ExitWaiting, "check-staging", "resume", "k")
		_ = os.RemoveAll(db)
	}
	t.Logf("%d runs killed within %v of the model being asked (half a resume's tail): the change was there in %d, absent in %d", runs, tail/2, applied, runs-applied)
}

// A human who replans after the reject and before the resume has answered it: the owner agent
// is not asked, and the human's change is the one that runs.
func TestHumanReplanBeforeResumeAnswersTheRejection(t *testing.T) {
	srv := modelServer(stagingChange)
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "approve h g1", "run", writeTask(t, dir, "h.yaml", fmt.Sprintf(ownerTask, "h", "h", srv.Endpoint())))
	expectIn(t, db, ExitOK, "rejected", "reject", "h", "--reason", "not to production")
	expectIn(t, db, ExitOK, "replanned: skip ship", "replan", "h", writeTask(t, dir, "skip.yaml", "skip: [ship]\n"), "--by", "ada")
	expectIn(t, db, ExitOK, "harness h: completed", "resume", "h")
	if n := len(replanRequests(srv)); n != 0 {
		t.Fatalf("the owner was asked to replan %d times after a human did", n)
	}
	if st := storeState(t, db, "h"); deref(st.Plan.Steps[1].Output) != "(skipped by ada)" {
		t.Fatalf("ship: %q", deref(st.Plan.Steps[1].Output))
	}
}

// Through the daemon's HTTP API: the reject answer names the agent that will replan, a resume
// queues the harness, the owner replans and the harness stops at the next gate with the new
// plan; the socket's `plan` shows it.
func TestOwnerAgentReplansThroughTheDaemonAndItsHTTPAPI(t *testing.T) {
	srv := modelServer(stagingChange)
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "approve d g1", "run", writeTask(t, dir, "d.yaml", fmt.Sprintf(ownerTask, "d", "d", srv.Endpoint())))
	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	code, body := d.http("POST", "/v1/harnesses/d/reject", token, []byte(`{"reason": "production is frozen"}`))
	if code != 200 || !strings.Contains(body, `"replanner":"agent:P"`) {
		t.Fatalf("HTTP reject: %d %s", code, body)
	}
	if code, body := d.http("POST", "/v1/harnesses/d/resume", token, nil); code != 200 && code != 202 {
		t.Fatalf("HTTP resume: %d %s", code, body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, out, _ := run(t, "--store", db, "show", "d", "--json")
		st, err := statefmt.DecodeJSON([]byte(out))
		if err == nil && len(st.Gates) > 0 {
			if g := st.Gates[len(st.Gates)-1]; g.Status == statefmt.GatePending && g.StepID == "check-staging" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the harness did not reach the check of staging:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	expectIn(t, db, ExitOK, "check-staging (critical)", "plan", "d")
	reqs := replanRequests(srv)
	if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[1].Text(), "production is frozen") {
		t.Fatalf("%d replan requests", len(reqs))
	}
}
