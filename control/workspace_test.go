package control_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
)

// A harness that waits for a workspace another one holds is queued, and waiting for its
// workspace, for as long as it waits: also in the moments the daemon tries the workspace again
// (it is not running then), and the log says so once, not at every try.
func TestHealthKeepsAHarnessWaitingForItsWorkspaceQueued(t *testing.T) {
	dir, ws := filepath.Join(t.TempDir(), "store"), filepath.Join(t.TempDir(), "ws")
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := control.StartDaemon(ctx, control.DaemonConfig{Dir: dir, Concurrency: 2, Grace: 20 * time.Second,
		Version: "test", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); d.Wait() })
	task := func(id string) []byte {
		return fmt.Appendf(nil, "id: %s\nagent: A\nworkspace: %s\nagents:\n  A: {driver: script, script: {plan: [{id: s, description: wait, agent: A}], steps: {s: [{sleep: 4s}]}}}\n", id, ws)
	}
	c := connect(t, dir)
	for _, id := range []string{"holder", "waiter"} {
		if _, err := c.Submit(context.Background(), control.Submission{Task: task(id), Name: id + ".yaml"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the holder first
	}
	waiting := func(h control.Health) bool {
		_, ok := h.WaitingForWorkspace["waiter"]
		return ok && slices.Contains(h.Queued, "waiter") && !slices.Contains(h.Running, "waiter")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h, err := c.Health(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if waiting(h) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never waited for its workspace: %+v", h)
		}
	}
	// Several of the daemon's tries later, it has waited all along.
	for end := time.Now().Add(2 * control.WorkspaceRetry * 3); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		h, err := c.Health(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !waiting(h) {
			t.Fatalf("health while the waiter waits: running %v, queued %v, waiting for a workspace %v", h.Running, h.Queued, h.WaitingForWorkspace)
		}
	}
	// The log says once that it runs and once that it waits, not at every try.
	for _, msg := range []string{`msg=running harness=waiter`, `msg="waiting for its workspace" harness=waiter`} {
		if n := strings.Count(logs.String(), msg); n != 1 {
			t.Errorf("the log says %q %d times over the waiter's wait:\n%s", msg, n, logs.String())
		}
	}
}

// A harness waiting in the daemon's queue for a slot is not running: a change of course on it
// is refused, changing nothing, with the words for where it is (queued) and what takes it out.
func TestAChangeOfCourseOnAQueuedHarnessSaysItIsQueued(t *testing.T) {
	dir, tmp := filepath.Join(t.TempDir(), "store"), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := control.StartDaemon(ctx, control.DaemonConfig{Dir: dir, Concurrency: 1, Grace: 20 * time.Second,
		Version: "test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); d.Wait() })
	task := func(id string) []byte {
		return fmt.Appendf(nil, "id: %s\nagent: A\nworkspace: %s\nagents:\n  A: {driver: script, script: {plan: [{id: s, description: wait, agent: A}], steps: {s: [{sleep: 4s}]}}}\n",
			id, filepath.Join(tmp, id))
	}
	c := connect(t, dir)
	for _, id := range []string{"first", "second"} {
		if _, err := c.Submit(context.Background(), control.Submission{Task: task(id), Name: id + ".yaml"}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h, err := c.Health(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(h.Running, "first") && slices.Contains(h.Queued, "second") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never one running and one queued: %+v", h)
		}
	}
	ctx2 := context.Background()
	_, errDelete := c.Delete(ctx2, "second", true)
	_, errReplan := c.Replan(ctx2, "second", control.ReplanRequest{Change: "remove: [s]"})
	_, errRollback := c.Rollback(ctx2, "second", control.RollbackRequest{To: "1"})
	_, errRetry := c.Retry(ctx2, "second", control.RetryRequest{})
	for what, err := range map[string]error{"delete": errDelete, "replan": errReplan, "rollback": errRollback, "retry": errRetry} {
		// It has not started: pause would refuse it, stop takes it off the queue.
		if err == nil || !strings.Contains(err.Error(), "harness second is queued in the daemon and has not started: stop it first (`harness-edge stop second`)") {
			t.Errorf("%s of a queued harness: %v", what, err)
		}
	}
	_, errDelete = c.Delete(ctx2, "first", true)
	if errDelete == nil || !strings.Contains(errDelete.Error(), "harness first is running in the daemon") {
		t.Errorf("delete of a running harness: %v", errDelete)
	}
	if h, err := c.Health(ctx2); err != nil || !slices.Contains(h.Queued, "second") {
		t.Fatalf("the refusals changed the queue: %+v %v", h, err)
	}
}
