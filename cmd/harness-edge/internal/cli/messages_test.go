package cli

import (
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
