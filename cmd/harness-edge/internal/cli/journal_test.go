package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/statefmt"
)

// shipTask: six steps in a row, each calling the side-effecting tool "ship", which logs a start
// line in a ledger outside the workspace, works a little, and logs an end line.
func shipTask(id, ws, ledger, replay string) string {
	var plan, steps strings.Builder
	for i := range 6 {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("s%d", i-1)
		}
		fmt.Fprintf(&plan, "        - {id: s%d, description: ship %d, agent: A, dependsOn: [%s]}\n", i, i, dep)
		fmt.Fprintf(&steps, "        s%d:\n          - {tool: ship, args: {step: s%d}}\n          - {sleep: %dms}\n          - {output: \"shipped %d\"}\n", i, i, 3+i*2, i)
	}
	return fmt.Sprintf(`id: %s
agent: A
autonomy: 4
workspace: %s
agents:
  A:
    driver: script
    tools: [ship]
    script:
      plan:
%s      steps:
%s
tools:
  ship:
    command: [sh, -c, 'read -r a; echo "start $a" >> %s; sleep 0.01; echo "end $a" >> %s; echo "{\"ok\": true}"']
    sideEffects: true
    replay: %s
`, id, ws, plan.String(), steps.String(), ledger, ledger, replay)
}

// TestKill9SideEffectJournal kills a run with SIGKILL at random instants (often while "ship"
// runs) and resumes it until it completes. The intent/receipt journal must ensure that no call
// runs twice unless its replay policy allowed it: with replay: skip never; with replay: ask
// only as often as a human approved running it again (here, always).
func TestKill9SideEffectJournal(t *testing.T) {
	for _, replay := range []string{"skip", "ask"} {
		t.Run(replay, func(t *testing.T) {
			kills, replays := 0, 0
			for round := range 3 {
				k, r := shipUntilDone(t, fmt.Sprintf("k%d", round), replay)
				kills, replays = kills+k, replays+r
			}
			t.Logf("replay %s: %d kills, %d of them left a call with an intent and no receipt", replay, kills, replays)
			if kills < 9 || replays < 3 {
				t.Fatalf("%d kills, %d inside a side-effecting call: the test tested little", kills, replays)
			}
		})
	}
}

// shipUntilDone runs shipTask under random SIGKILLs until it completes and checks the ledger.
// It returns the kills and how many of them hit a call between its intent and its receipt.
func shipUntilDone(t *testing.T, id, replay string) (kills, replays int) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	taskFile := filepath.Join(dir, "k.yaml")
	if err := os.WriteFile(taskFile, []byte(shipTask(id, filepath.Join(dir, "ws"), ledger, replay)), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "store")
	kills = killUntilDone(t, db, taskFile, id, 15, true, func() {
		if replay != "ask" {
			t.Fatal("waiting for a human without replay: ask")
		}
		if c, o, e := run(t, "--store", db, "approve", id); c != 0 || !strings.Contains(o, "on running a call of step") {
			t.Fatalf("approve: exit %d: %s %s", c, o, e)
		}
	})
	_, stdout, _ := run(t, "--store", db, "show", id, "--json")
	st, err := statefmt.DecodeJSON([]byte(stdout))
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != statefmt.StatusCompleted || len(st.SideEffects) != 0 {
		t.Fatalf("final: %s, %d journal entries left", st.Status, len(st.SideEffects))
	}
	approved := map[string]int{}
	for _, g := range st.Gates {
		if g.Kind != "replay" || g.Status != statefmt.GateApproved {
			t.Fatalf("unexpected gate %+v", g)
		}
		approved[g.StepID]++
		replays++
	}
	_, events, _ := run(t, "--store", db, "events", id, "--json")
	replays += strings.Count(events, `"action":"skip"`)
	data, _ := os.ReadFile(ledger)
	starts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if rest, ok := strings.CutPrefix(line, "start "); ok {
			if rest == "" { // killed with the harness before it got its arguments
				starts["?"]++
				continue
			}
			var a struct{ Step string }
			if err := json.Unmarshal([]byte(rest), &a); err != nil {
				t.Fatalf("ledger line %q: %v", line, err)
			}
			starts[a.Step]++
		}
	}
	for i := range 6 {
		s := fmt.Sprintf("s%d", i)
		if starts[s] > 1+approved[s] {
			t.Errorf("ship for %s ran %d times with %d approvals to run it again", s, starts[s], approved[s])
		}
		if findCall(st, s) == nil {
			t.Errorf("no record of ship for %s", s)
		}
	}
	total, allowed := 0, 6
	for _, n := range starts {
		total += n
	}
	for _, n := range approved {
		allowed += n
	}
	if total > allowed {
		t.Errorf("ship ran %d times in all, with %d approvals to run a call again", total, allowed-6)
	}
	if len(st.ToolCallHistory) != 6 {
		t.Errorf("%d calls recorded, want 6", len(st.ToolCallHistory))
	}
	return kills, replays
}

// killUntilDone runs a task file in a child process, then resumes it, killing each run with
// SIGKILL after a random number of events, or (with intents, half the time) just after a side-effecting call's
// intent is durable, at a random instant up to 15 ms later, until it completes. A run that
// stops at a human gate (exit 3) calls waiting and resumes. It returns the kills (at most max;
// then the runs go on unkilled).
func killUntilDone(t *testing.T, db, taskFile, id string, max int, intents bool, waiting func()) (kills int) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	for attempt := 0; ; attempt++ {
		if attempt > 300 {
			t.Fatal("not done after 300 runs")
		}
		args := []string{"--store", db, "resume", id, "--json"}
		if attempt == 0 {
			args = []string{"--store", db, "run", taskFile, "--json"}
		}
		cmd := child(args...)
		out, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		targetIntent, killAfter := intents && r.IntN(2) == 0, 1+r.IntN(12)
		if targetIntent {
			killAfter = 1 + r.IntN(2)
		}
		sc := bufio.NewScanner(out)
		seen := 0
		for seen < killAfter && sc.Scan() {
			if !targetIntent || strings.Contains(sc.Text(), `"action":"intent"`) {
				seen++
			}
		}
		if seen == killAfter && kills < max {
			time.Sleep(time.Duration(r.IntN(15000)) * time.Microsecond)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		for sc.Scan() {
		}
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			kills++
			continue
		}
		code := cmd.ProcessState.ExitCode()
		switch {
		case code == ExitWaiting:
			waiting()
			continue
		case code == ExitOK, attempt > 0 && strings.Contains(stderr.String(), "harness "+id+" is completed"):
			return kills
		default:
			t.Fatalf("run %d (%v): exit %d: %s", attempt, args, code, stderr.String())
		}
	}
}

// eventLog is a harness's durable event log, one JSON event per line.
func eventLog(s *store.Store, id string) string {
	var b strings.Builder
	_ = s.Events(id, 0, func(e event.Event) bool {
		data, _ := event.Encode(e)
		b.Write(data)
		b.WriteByte('\n')
		return true
	})
	return b.String()
}

func findCall(st *statefmt.HarnessState, step string) *statefmt.ToolCallRecord {
	for i, r := range st.ToolCallHistory {
		if strings.Contains(string(r.Arguments), `"`+step+`"`) {
			return &st.ToolCallHistory[i]
		}
	}
	return nil
}

// TestKill9WithSubAgents kills a run whose steps are delegated to sub-agents at random instants
// and resumes the parent until it completes: parent and children resume consistently. Every
// child is tracked by the parent (none orphaned), completes exactly once, and the outputs
// equal an uninterrupted run's.
func TestKill9WithSubAgents(t *testing.T) {
	dir := t.TempDir()
	src := func(ws string) string {
		return fmt.Sprintf(`id: d
agent: A
autonomy: 4
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      steps:
        "*": [{tool: write_file, args: {path: a.txt, content: a}}, {sleep: 4ms}, {output: "A's part"}]
  B:
    driver: script
    tools: [write_file, read_file]
    script:
      steps:
        "*": [{tool: write_file, args: {path: b.txt, content: b}}, {sleep: 6ms}, {tool: read_file, args: {path: b.txt}}, {output: "B's part"}]
  C:
    driver: script
    tools: [write_file]
    script:
      plan:
        - {id: c1, description: C first, agent: C}
        - {id: c2, description: C hands to B, agent: B, dependsOn: [c1]}
      steps:
        "*": [{tool: write_file, args: {path: c.txt, content: c}}, {sleep: 5ms}, {output: "C's part"}]
plan:
  - {id: s0, description: owner work, agent: A}
  - {id: s1, description: B work, agent: B}
  - {id: s2, description: C work, agent: C, dependsOn: [s1]}
  - {id: s3, description: more B work, agent: B, dependsOn: [s0]}
  - {id: s4, description: owner wraps up, agent: A, dependsOn: [s2, s3]}
`, ws)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	refStore := filepath.Join(dir, "ref-store")
	if code, _, stderr := run(t, "--store", refStore, "run", write("ref.yaml", src(filepath.Join(dir, "ref-ws")))); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, stderr)
	}
	db := filepath.Join(dir, "store")
	kills := 0
	for round := range 4 {
		s := filepath.Join(db, fmt.Sprint(round))
		kills += killUntilDone(t, s, write("d.yaml", src(filepath.Join(dir, "ws"))), "d", 12, false, func() { t.Fatal("waiting for a human at autonomy 4") })
		checkDelegation(t, s, refStore)
	}
	if kills < 8 {
		t.Fatalf("only %d kills: the test tested little", kills)
	}
	t.Logf("%d kills", kills)
}

func checkDelegation(t *testing.T, db, refStore string) {
	t.Helper()
	load := func(dir string) (map[string]*statefmt.HarnessState, map[string]string) {
		s, err := store.OpenStore(dir, store.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		list, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		states, logs := map[string]*statefmt.HarnessState{}, map[string]string{}
		for _, l := range list {
			if states[l.ID], err = s.Restore(l.ID); err != nil {
				t.Fatal(err)
			}
			logs[l.ID] = eventLog(s, l.ID)
		}
		return states, logs
	}
	got, logs := load(db)
	want, _ := load(refStore)
	if len(got) != len(want) || len(got) != 5 { // d; its children for s1, s2, s3; and d.s2.c2, C delegating to B
		ids := []string{}
		for id := range got {
			ids = append(ids, id)
		}
		t.Fatalf("store holds %v, the uninterrupted run %d harnesses", ids, len(want))
	}
	for id, st := range got {
		w, ok := want[id]
		if !ok {
			t.Fatalf("harness %s exists only in the interrupted run", id)
		}
		if st.Status != statefmt.StatusCompleted {
			t.Errorf("harness %s is %s (%s)", id, st.Status, st.StatusReason)
		}
		if out, wout := runtimeOutput(st), runtimeOutput(w); out != wout {
			t.Errorf("harness %s output %q, uninterrupted %q", id, out, wout)
		}
		if n := strings.Count(logs[id], `"type":"plan_completed"`); n != 1 {
			t.Errorf("harness %s completed %d times", id, n)
		}
		if st.ParentHarnessID != "" {
			p := got[st.ParentHarnessID]
			if p == nil || !containsString(p.SubAgentIDs, id) || p.SubAgentResults[id].Status != statefmt.StatusCompleted {
				t.Errorf("child %s is not tracked as completed by its parent %s", id, st.ParentHarnessID)
			}
			if n := strings.Count(logs[st.ParentHarnessID], `"outcome":"completed","subAgentId":"`+id+`"`); n != 1 {
				t.Errorf("parent %s saw child %s complete %d times", st.ParentHarnessID, id, n)
			}
		}
	}
}

func runtimeOutput(st *statefmt.HarnessState) string {
	var out []string
	for _, s := range st.Plan.Steps {
		if s.Output != nil {
			out = append(out, s.ID+"="+*s.Output)
		}
	}
	return strings.Join(out, ";")
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
