package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunOfAFinishedHarnessSaysItCannotBeResumed: running a task whose harness already
// completed is refused with what can be done with it, not with "resume it".
func TestRunOfAFinishedHarnessSaysItCannotBeResumed(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	f := writeTask(t, dir, "once.yaml", daemonTask("once", ws, 1, "1ms", false))
	if code, out, stderr := run(t, "--store", db, "run", f); code != ExitOK {
		t.Fatalf("run: exit %d: %s%s", code, out, stderr)
	}
	code, _, stderr := run(t, "--store", db, "run", f)
	if code != ExitError || !strings.Contains(stderr, "has completed, so it cannot be resumed") || strings.Contains(stderr, "resume it") {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	}
}

// TestEventsPrintsOneLinePerEvent: a multi-line message (an agent's feedback, a step's error)
// stays on its event's line of the table.
func TestEventsPrintsOneLinePerEvent(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	f := writeTask(t, dir, "ml.yaml", fmt.Sprintf(`id: ml
agent: A
workspace: %s
retry: {maxRetries: 2, base: 1ms}
agents:
  A:
    driver: script
    script:
      steps:
        "*":
          - {fail: transient, message: "first line\nsecond line\nthird line", times: 1}
          - {output: done}
plan:
  - {id: s1, description: flaky, agent: A}
`, filepath.Join(dir, "ws")))
	if code, out, stderr := run(t, "--store", db, "run", f); code != ExitOK {
		t.Fatalf("run: exit %d: %s%s", code, out, stderr)
	}
	_, js, _ := run(t, "--store", db, "events", "ml", "--json")
	code, out, stderr := run(t, "--store", db, "events", "ml")
	if code != ExitOK {
		t.Fatalf("events: exit %d: %s", code, stderr)
	}
	events, lines := strings.Count(js, "\n"), strings.Count(out, "\n")
	if events == 0 || lines != events || !strings.Contains(out, `first line\nsecond line\nthird line`) {
		t.Fatalf("%d events, %d lines:\n%s", events, lines, out)
	}
}
