package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
)

// counterTask: one step that increments the number in the workspace's file count five times,
// reading it, sleeping, and writing it back (two such harnesses at once would lose increments),
// between a "start ID" and an "end ID" line appended to the file order.
func counterTask(id, ws string) string {
	return fmt.Sprintf(`id: %s
agent: A
workspace: %s
agents:
  A:
    driver: script
    tools: [bash]
    script:
      plan:
        - {id: count, description: count to five, agent: A}
      steps:
        "*":
          - {tool: bash, args: {command: "echo start %s >> order; for i in 1 2 3 4 5; do n=$(cat count 2>/dev/null || echo 0); sleep 0.2; echo $((n+1)) > count; done; echo end %s >> order"}}
`, id, ws, id, id)
}

// readerTask: a harness that only reads its workspace (shared read-only), for a second.
func readerTask(id, ws string) string {
	return fmt.Sprintf(`id: %s
agent: A
workspace: {path: %s, shared: read-only}
agents:
  A:
    driver: script
    tools: [read_file, bash]
    script:
      plan:
        - {id: read, description: read slowly, agent: A}
      steps:
        "*":
          - {tool: bash, args: {command: "cat data.txt; sleep 1"}}
`, id, ws)
}

// waitLockHeld waits until the workspace's lock file names the harness.
func waitLockHeld(t *testing.T, ws, id string) harness.WorkspaceHolder {
	t.Helper()
	lock, err := harness.WorkspaceLockFile(ws)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(lock)
		if strings.Contains(string(b), `"harnessId":"`+id+`"`) {
			var h harness.WorkspaceHolder
			if err := json.Unmarshal(b, &h); err != nil {
				t.Fatal(err)
			}
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock file %s never named %s (it holds %q)", lock, id, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A foreground run on a workspace another live harness holds is refused, naming the holder,
// and creates nothing; once the holder has finished, the same run goes through. Neither run
// loses an increment of the other's.
func TestRunOnABusyWorkspaceIsRefusedNamingTheHolder(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	first := child("--store", filepath.Join(dir, "s1"), "run", writeTask(t, dir, "a.yaml", counterTask("a", ws)))
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	holder := waitLockHeld(t, ws, "a")
	if holder.PID != first.Process.Pid || holder.Mode != "exclusive" {
		t.Fatalf("the lock file says %+v; the holder is pid %d", holder, first.Process.Pid)
	}
	second := filepath.Join(dir, "s2")
	bTask := writeTask(t, dir, "b.yaml", counterTask("b", ws))
	code, _, stderr := run(t, "--store", second, "run", bTask)
	want := fmt.Sprintf("workspace %s is in use by harness a (pid %d", ws, first.Process.Pid)
	if code != ExitError || !strings.Contains(stderr, want) {
		t.Fatalf("second run: exit %d: %q, want it to say %q", code, stderr, want)
	}
	if code, out, _ := run(t, "--store", second, "show", "b"); code == ExitOK {
		t.Fatalf("the refused run created a harness:\n%s", out)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first run: %v: %s", err, firstErr.String())
	}
	if code, _, stderr := run(t, "--store", second, "run", bTask); code != ExitOK {
		t.Fatalf("second run after the first finished: exit %d: %s", code, stderr)
	}
	if got := readFile(t, filepath.Join(ws, "count")); got != "10\n" {
		t.Fatalf("count is %q after two harnesses counted to five each", got)
	}
	if got := readFile(t, filepath.Join(ws, "order")); got != "start a\nend a\nstart b\nend b\n" {
		t.Fatalf("the two runs overlapped:\n%s", got)
	}
}

// A harness killed with SIGKILL leaves its lock file naming it, but the kernel has let go of
// the lock: the next harness takes the workspace over at once.
func TestKilledHoldersWorkspaceIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	first := child("--store", filepath.Join(dir, "s1"), "run", writeTask(t, dir, "a.yaml", counterTask("a", ws)))
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitLockHeld(t, ws, "a")
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	lock, _ := harness.WorkspaceLockFile(ws)
	if !strings.Contains(readFile(t, lock), fmt.Sprintf(`"pid":%d`, first.Process.Pid)) {
		t.Fatalf("the killed holder's record is gone from the lock file: %q", readFile(t, lock))
	}
	if code, _, stderr := run(t, "--store", filepath.Join(dir, "s2"), "run", writeTask(t, dir, "b.yaml", counterTask("b", ws))); code != ExitOK {
		t.Fatalf("a run after the holder was killed: exit %d: %s", code, stderr)
	}
	if got := readFile(t, lock); got != "" {
		t.Fatalf("the lock file still names a holder after the run: %q", got)
	}
}

// The daemon runs two harnesses at once, but not two on one workspace: the second waits in the
// queue (it is not failed) and runs when the first is done, with no write lost. Harnesses that
// share a workspace read-only run together.
func TestDaemonQueuesAHarnessUntilItsWorkspaceIsFree(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	d := startDaemon(t, db)
	for _, id := range []string{"a", "b"} {
		if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, id+".yaml", counterTask(id, ws))); code != ExitOK {
			t.Fatalf("submit %s: exit %d: %s%s", id, code, out, stderr)
		}
	}
	waitStatus(t, db, "a", statefmt.StatusCompleted)
	waitStatus(t, db, "b", statefmt.StatusCompleted)
	if got := readFile(t, filepath.Join(ws, "count")); got != "10\n" {
		t.Fatalf("count is %q after two harnesses counted to five each", got)
	}
	order := readFile(t, filepath.Join(ws, "order"))
	if order != "start a\nend a\nstart b\nend b\n" && order != "start b\nend b\nstart a\nend a\n" {
		t.Fatalf("the two harnesses overlapped:\n%s", order)
	}
	if !strings.Contains(d.log.String(), "waiting for its workspace") {
		t.Errorf("the daemon's log does not say a harness waited for its workspace:\n%s", d.log)
	}

	// Readers share.
	rws := filepath.Join(dir, "rws")
	if err := os.MkdirAll(rws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rws, "data.txt"), []byte("shared data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2"} {
		if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, id+".yaml", readerTask(id, rws))); code != ExitOK {
			t.Fatalf("submit %s: exit %d: %s%s", id, code, out, stderr)
		}
	}
	r1, r2 := waitStatus(t, db, "r1", statefmt.StatusCompleted), waitStatus(t, db, "r2", statefmt.StatusCompleted)
	c1, c2 := r1.ToolCallHistory[0], r2.ToolCallHistory[0]
	if c1.Result.Output != "shared data\n" || c2.Result.Output != "shared data\n" {
		t.Fatalf("the readers read %q and %q", c1.Result.Output, c2.Result.Output)
	}
	if !c1.Timestamp.Before(c2.Timestamp.Add(c2.Duration)) || !c2.Timestamp.Before(c1.Timestamp.Add(c1.Duration)) {
		t.Fatalf("the read-only harnesses did not run together: %v+%v and %v+%v", c1.Timestamp, c1.Duration, c2.Timestamp, c2.Duration)
	}
}
