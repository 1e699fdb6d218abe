package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// TestInspectWhileADaemonOwnsTheStoreSaysWhatToDo: inspect, export and import read or write
// the store's files themselves. While a daemon owns the store they are refused, naming the
// daemon and its pid, saying to stop it (and how) and what goes through it meanwhile, never to
// use the control socket, which they do not; while a foreground run owns it, to wait for the
// run or pause it. Once the owner is gone, inspect works. A process that holds the store
// without a socket is waited for a moment, then named.
func TestInspectWhileADaemonOwnsTheStoreSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	d := startDaemon(t, db)
	pid := d.cmd.Process.Pid
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "a.yaml", daemonTask("a", ws, 1, "1ms", false))); code != ExitOK {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "a", statefmt.StatusCompleted)
	owned := fmt.Sprintf("store in use: %s is owned by the harness-edge daemon (pid %d), and ", db, pid)
	stop := fmt.Sprintf("the store's files itself, not through the daemon: stop the daemon (`kill %d`: it pauses what runs, and the next `harness-edge serve` resumes it), ", pid)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "a"}, owned + "inspect reads " + stop + "run inspect, then start the daemon again; meanwhile `harness-edge checkpoints a` and `harness-edge verify a` go through it"},
		{[]string{"export", "a"}, owned + "export reads " + stop + "run export, then start the daemon again; meanwhile `harness-edge show a --json` prints the same state through it"},
		{[]string{"export", "a", "--chain"}, owned + "export reads " + stop + "run export, then start the daemon again\n"},
		{[]string{"import", writeTask(t, dir, "a.export", "not an export")}, owned + "import writes " + stop + "run import, then start the daemon again\n"},
	} {
		code, out, stderr := run(t, append([]string{"--store", db}, c.args...)...)
		if code != ExitError || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "control socket") || out != "" {
			t.Errorf("%v: exit %d: %s%s\nwant: %s", c.args, code, out, stderr, c.want)
		}
	}
	// What the message says goes through the daemon does.
	if code, out, stderr := run(t, "--store", db, "checkpoints", "a"); code != ExitOK || !strings.Contains(out, "recent: checkpoints") {
		t.Fatalf("checkpoints through the daemon: exit %d: %s%s", code, out, stderr)
	}
	// As the message says: the daemon stopped with SIGTERM (kill's), inspect works.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon did not exit after SIGTERM")
	}
	if code, out, stderr := run(t, "--store", db, "inspect", "a"); code != ExitOK || !strings.Contains(out, "stored bytes") {
		t.Fatalf("inspect once the daemon stopped: exit %d: %s%s", code, out, stderr)
	}

	// A foreground run: wait for it, or pause it.
	cmd := child("--store", db, "run", writeTask(t, dir, "f.yaml", daemonTask("f", ws, 5, "400ms", false)))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitStatus(t, db, "f", statefmt.StatusRunning)
	want := fmt.Sprintf("store in use: %s is owned by a foreground `harness-edge run` (pid %d, running f), and inspect reads the store's files itself: "+
		"wait for the run to end, or pause it with `harness-edge pause ID`, then run inspect again; meanwhile `harness-edge checkpoints f`", db, cmd.Process.Pid)
	if code, _, stderr := run(t, "--store", db, "inspect", "f"); code != ExitError || !strings.Contains(stderr, want) {
		t.Fatalf("inspect beside a foreground run: exit %d: %s\nwant: %s", code, stderr, want)
	}
	if code, out, stderr := run(t, "--store", db, "pause", "f"); code != ExitOK {
		t.Fatalf("pause: exit %d: %s%s", code, out, stderr)
	}
	_ = cmd.Wait()
	if code, out, stderr := run(t, "--store", db, "inspect", "f"); code != ExitOK || !strings.Contains(out, "stored bytes") {
		t.Fatalf("inspect once the run paused: exit %d: %s%s", code, out, stderr)
	}

	// A process that holds the store and serves no socket (this one) is waited for, then named.
	held, err := store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	want = fmt.Sprintf("store in use: %s is in use by pid %d, which does not answer on the store's control socket, and inspect reads the store's files itself: run it again once that process has ended", db, os.Getpid())
	if code, _, stderr := run(t, "--store", db, "inspect", "f"); code != ExitError || !strings.Contains(stderr, want) {
		t.Fatalf("inspect beside a process with no socket: exit %d: %s\nwant: %s", code, stderr, want)
	}
}
