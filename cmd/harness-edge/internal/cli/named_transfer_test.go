package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// A named checkpoint travels with its harness (real processes, stores on disk): exported with
// `export --chain`, imported into a fresh store, listed there by `checkpoints`, and rolled back
// to there; `import --replace` over a harness with other names brings the export's names and
// drops the old ones.
func TestNamedCheckpointsTravelWithExportAndImport(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	expectIn(t, db, ExitWaiting, "approve b g1", "run", writeTask(t, dir, "b.yaml", strings.ReplaceAll(gatedTask, "%s", "b")))
	expectIn(t, db, ExitOK, "named before-ship", "checkpoint", "b", "--name", "before-ship")
	expectIn(t, db, ExitOK, "approved", "approve", "b")
	expectIn(t, db, ExitOK, "harness b: completed", "resume", "b")
	file := filepath.Join(dir, "b.export")
	expectIn(t, db, ExitOK, "", "export", "b", "--chain", "-o", file)

	fresh := filepath.Join(dir, "fresh")
	expectIn(t, fresh, ExitOK, "named checkpoints b/before-ship", "import", file)
	expectIn(t, fresh, ExitOK, "before-ship", "checkpoints", "b")
	expectIn(t, fresh, ExitOK, `rolled back to "before-ship" (1/3 steps done)`, "rollback", "b", "--to", "before-ship")
	expectIn(t, fresh, ExitWaiting, "approve b g1", "resume", "b")
	expectIn(t, fresh, ExitOK, "approved", "approve", "b")
	expectIn(t, fresh, ExitOK, "harness b: completed", "resume", "b")
	expectIn(t, fresh, ExitOK, "every chain replays", "verify")

	other := filepath.Join(dir, "other")
	expectIn(t, other, ExitWaiting, "approve b g1", "run", writeTask(t, dir, "b.yaml", strings.ReplaceAll(gatedTask, "%s", "b")))
	expectIn(t, other, ExitOK, "named mine", "checkpoint", "b", "--name", "mine")
	expectIn(t, other, ExitError, "already exists", "import", file)
	expectIn(t, other, ExitOK, "mine", "checkpoints", "b")
	expectIn(t, other, ExitOK, "replaced b", "import", file, "--replace")
	out := expectIn(t, other, ExitOK, "before-ship", "checkpoints", "b")
	if strings.Contains(out, "mine") {
		t.Fatalf("the replaced harness's own name survived:\n%s", out)
	}
	expectIn(t, other, ExitOK, `rolled back to "before-ship"`, "rollback", "b", "--to", "before-ship")
	expectIn(t, other, ExitOK, "every chain replays", "verify")
}
