package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/statefmt"
)

// TestKill9RalphLoop runs the command driver's example agent (a shell script standing in for a
// CLI agent) in a child process and kills that process with SIGKILL twice: halfway through
// iteration 2, and in iteration 3 after the agent printed its completion promise but before it
// exited. Each resume must run the iteration cut short again (and only it), kill what the
// killed iteration left running, and never take the promise printed before the crash as
// completion.
func TestKill9RalphLoop(t *testing.T) {
	dir := t.TempDir()
	ws, db := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	agent, _ := filepath.Abs("../../../../examples/agents/fake-agent.sh")
	taskFile := filepath.Join(dir, "ralph.yaml")
	src := fmt.Sprintf(`id: ralph
prompt: write three parts
agent: R
autonomy: 4
workspace: %s
agents:
  R:
    driver: command
    command: [sh, %s]
    completionPromise: PARTS_DONE
    env: [FAKE_AGENT_PAUSE, FAKE_AGENT_LINGER, FAKE_AGENT_RESET, FAKE_AGENT_LEFTOVER]
plan: [{id: write, description: write the parts, agent: R}]
`, ws, agent)
	if err := os.WriteFile(taskFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_AGENT_PAUSE", "1")
	t.Setenv("FAKE_AGENT_LINGER", "1")
	t.Setenv("FAKE_AGENT_RESET", "1 second")
	// The killed iterations' helpers outlive them by far more than a resume takes to start (a
	// second under qemu in CI once outlasted a helper that lived as long as the pause).
	t.Setenv("FAKE_AGENT_LEFTOVER", "60")

	// killAt runs (or resumes) the task and kills the process once marker holds a pid.
	killAt := func(args []string, marker string) {
		cmd := child(args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for b, _ := os.ReadFile(filepath.Join(ws, marker)); !strings.HasSuffix(string(b), "\n"); b, _ = os.ReadFile(filepath.Join(ws, marker)) {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("%s never appeared", marker)
			}
			time.Sleep(2 * time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !st.Signaled() {
			t.Fatalf("the run ended before the kill: exit %d", cmd.ProcessState.ExitCode())
		}
	}
	killAt([]string{"--store", db, "run", taskFile}, "working.2")
	killAt([]string{"--store", db, "resume", "ralph"}, "promised.3")
	if code, out, stderr := run(t, "--store", db, "resume", "ralph"); code != ExitOK {
		t.Fatalf("final resume: exit %d: %s%s", code, out, stderr)
	}
	// The agent's own child (its "sleep") of each killed iteration outlived the kill (Pdeathsig
	// reaches the agent only) and was killed by the next run before it ran the iteration again.
	for _, marker := range []string{"working.2", "promised.3"} {
		b, _ := os.ReadFile(filepath.Join(ws, marker))
		if pid := strings.TrimSpace(string(b)); pid == "" || outlives(pid, 5*time.Second) {
			t.Errorf("the killed iteration's child %s (%s) still runs", pid, marker)
		}
	}

	runs, _ := os.ReadFile(filepath.Join(ws, "runs.log"))
	if string(runs) != "started 1\nstarted 2\nstarted 2\nstarted 3\nstarted 3\n" {
		t.Fatalf("runs.log %q: iterations 2 and 3 should each have run twice, nothing else", runs)
	}
	s, err := store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Restore("ralph")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != statefmt.StatusCompleted || st.Iterations != 3 || !strings.Contains(*st.Plan.Steps[0].Output, "<promise>PARTS_DONE</promise>") {
		t.Fatalf("status %s, iterations %d, output %q", st.Status, st.Iterations, *st.Plan.Steps[0].Output)
	}
	log := eventLog(s, "ralph")
	if n := len(regexp.MustCompile(`killed [1-9]\d* leftover processes of the iteration cut short`).FindAllString(log, -1)); n != 2 {
		t.Fatalf("%d clean-ups of a killed iteration's processes, want 2:\n%s", n, log)
	}
	for _, want := range []string{`"outcome":"rate_limited"`, `"outcome":"completed","iteration":3`} {
		if !strings.Contains(log, want) {
			t.Fatalf("events lack %s:\n%s", want, log)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// processLives reports whether a process runs (a zombie does not).
// outlives says whether the process still lives after d: one sent SIGKILL can take a moment
// to die on a loaded machine, one never killed lives on (the leftovers sleep for a minute).
func outlives(pid string, d time.Duration) bool {
	for deadline := time.Now().Add(d); processLives(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return true
		}
	}
	return false
}

func processLives(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}
