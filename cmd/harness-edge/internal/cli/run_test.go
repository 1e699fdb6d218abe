package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/reexec"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// TestMain runs the command line itself when a test starts this binary as a child with
// HARNESS_EDGE_CLI_CHILD set (the arguments, separated by \x1f): the kill -9 test needs a real
// process to kill.
func TestMain(m *testing.M) {
	if args := os.Getenv("HARNESS_EDGE_CLI_CHILD"); args != "" {
		os.Exit(Main(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func child(args ...string) *exec.Cmd {
	return reexec.Command("HARNESS_EDGE_CLI_CHILD", strings.Join(args, "\x1f"))
}

// killTask: eight steps, each writing its own file and producing its own output, some flaky.
func killTask(id, ws string) string {
	var plan, steps strings.Builder
	for i := range 8 {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("s%d", i-1)
		}
		if i == 5 {
			dep = "s2"
		}
		fmt.Fprintf(&plan, "    - {id: s%d, description: step %d, agent: A, dependsOn: [%s]}\n", i, i, dep)
		fmt.Fprintf(&steps, "      s%d:\n        - {tool: write_file, args: {path: s%d.txt, content: \"step %d\"}}\n", i, i, i)
		if i%3 == 1 {
			fmt.Fprintf(&steps, "        - {fail: transient, message: flaky, times: 1}\n")
		}
		fmt.Fprintf(&steps, "        - {sleep: %dms}\n        - {output: \"output of step %d\"}\n", 5+i*3, i)
	}
	return fmt.Sprintf("id: %s\nagent: A\nworkspace: %s\nretry: {maxRetries: 2, base: 5ms}\nagents:\n  A:\n    driver: script\n    tools: [write_file]\n    script:\n      plan:\n%s      steps:\n%s",
		id, ws, strings.ReplaceAll(plan.String(), "    - ", "        - "), strings.ReplaceAll(steps.String(), "      s", "        s"))
}

// TestRunKill9ResumeUntilDone runs a script task in a child process, kills it with SIGKILL at
// random instants, and resumes it (killing again) until it completes. Every step's output is
// recorded exactly once and its tool calls once per finished attempt (an attempt cut short
// leaves no record), and the final state equals an uninterrupted run's, timestamps and
// checkpoint counts aside.
func TestRunKill9ResumeUntilDone(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The uninterrupted run.
	refStore := filepath.Join(dir, "ref-store")
	if code, _, stderr := run(t, "--store", refStore, "run", write("ref.yaml", killTask("k", filepath.Join(dir, "ref-ws")))); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, stderr)
	}
	db := filepath.Join(dir, "store")
	taskFile := write("k.yaml", killTask("k", filepath.Join(dir, "ws")))
	kills := killUntilDone(t, db, taskFile, "k", 200, false, func() { t.Fatal("waiting for a human at autonomy 3 without critical steps") })
	if kills < 3 {
		t.Fatalf("only %d runs were killed: the test tested little", kills)
	}
	restore := func(dir string) *statefmt.HarnessState {
		s, err := store.OpenStore(dir, store.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st, err := s.Restore("k")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	got, want := restore(db), restore(refStore)
	calls := func(st *statefmt.HarnessState) map[string]int {
		seen := map[string]int{}
		for _, rec := range st.ToolCallHistory {
			var a struct{ Path string }
			_ = json.Unmarshal(rec.Arguments, &a)
			seen[a.Path]++
		}
		return seen
	}
	seen := calls(got)
	for i := range 8 {
		// One call per finished attempt: the flaky steps (s1, s4, s7) write, fail, and write again.
		wantCalls := 1
		if i%3 == 1 {
			wantCalls = 2
		}
		if n := seen[fmt.Sprintf("s%d.txt", i)]; n != wantCalls || calls(want)[fmt.Sprintf("s%d.txt", i)] != wantCalls {
			t.Errorf("step s%d's tool call is recorded %d times (want %d)", i, n, wantCalls)
		}
		if o := got.Plan.Steps[i].Output; o == nil || *o != "wrote 6 bytes to s"+strconv.Itoa(i)+".txt\noutput of step "+strconv.Itoa(i) {
			t.Errorf("step s%d's output: %v", i, o)
		}
	}
	norm := func(s *statefmt.HarnessState) *statefmt.HarnessState {
		var zero time.Time
		s.CreatedAt, s.UpdatedAt, s.LastCheckpointAt, s.CheckpointCount, s.Plan.CreatedAt = zero, zero, nil, 0, zero
		for i := range s.ToolCallHistory {
			s.ToolCallHistory[i].Timestamp, s.ToolCallHistory[i].Duration = zero, 0
		}
		s.Budget.WallClockUsed = 0
		return s
	}
	if !reflect.DeepEqual(norm(got), norm(want)) {
		a, _ := statefmt.EncodeJSON(got)
		b, _ := statefmt.EncodeJSON(want)
		t.Fatalf("final state differs from the uninterrupted run's:\n%s\n%s", a, b)
	}
	t.Logf("%d kills before completion", kills)
}

// Ctrl-C (SIGINT) pauses the harness cleanly: state persisted, exit 3; resume finishes it.
func TestInterruptPausesAndResumeFinishes(t *testing.T) {
	dir := t.TempDir()
	taskFile := filepath.Join(dir, "k.yaml")
	if err := os.WriteFile(taskFile, []byte(strings.ReplaceAll(killTask("k", filepath.Join(dir, "ws")), "{sleep: ", "{sleep: 1")), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "store")
	cmd := child("--store", db, "run", taskFile, "--json")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"type":"step_started"`) {
			break
		}
	}
	_ = cmd.Process.Signal(os.Interrupt)
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != ExitWaiting || !strings.Contains(last, `"status":"paused"`) {
		t.Fatalf("after SIGINT: exit %d, last line %s", code, last)
	}
	code, stdout, _ := run(t, "--store", db, "show", "k", "--json")
	if code != 0 || !strings.Contains(stdout, `"paused"`) || !strings.Contains(stdout, `"interrupted"`) {
		t.Fatalf("show after SIGINT: %d %s", code, stdout)
	}
	if code, stdout, stderr := run(t, "--store", db, "resume", "k"); code != 0 || !strings.Contains(stdout, "harness k: completed") {
		t.Fatalf("resume: %d %s %s", code, stdout, stderr)
	}
	if code, stdout, _ := run(t, "--store", db, "events", "k"); code != 0 || !strings.Contains(stdout, "running -> paused  (interrupted)") || !strings.Contains(stdout, "plan_completed") {
		t.Fatalf("events: %s", stdout)
	}
}
