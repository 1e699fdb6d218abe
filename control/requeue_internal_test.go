package control

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
)

// A harness whose run was refused its workspace goes back to the head of the queue while that
// run is still ending (the scheduler counts it as running). Another run ending in that instant
// lets every waiting harness be tried at once: the scheduler must still not start a second run
// of it beside the first, whose end would then cancel the second and leave the daemon without
// the second's cancel (a nil call that took the daemon down with 3,000 harnesses on one
// workspace). It runs once the first run is over.
func TestTheSchedulerNeverRunsAHarnessTwiceAtOnce(t *testing.T) {
	srv := daemonServer(t, 2)
	src := fmt.Sprintf(`id: w
agent: A
workspace: %s
agents:
  A:
    driver: script
    script: {steps: {"*": [{output: done}]}}
plan:
  - {id: s0, description: one, agent: A}
`, t.TempDir())
	if _, err := srv.Submit(context.Background(), Submission{Task: []byte(src), Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	// Its run is ending, refused its workspace: back at the head of the queue, still running.
	srv.mu.Lock()
	srv.queue = nil
	srv.running["w"], srv.cancels["w"] = true, func(error) {}
	srv.mu.Unlock()
	srv.waitForWorkspace("w", errors.New("the workspace is held by another harness"))
	// Another run ends meanwhile: every waiting harness may be tried at once.
	srv.mu.Lock()
	srv.unblockAllLocked()
	srv.mu.Unlock()
	started := make(chan string, 4)
	srv.beforeRun = func(id string) { started <- id }
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Schedule(ctx, 10*time.Second); close(done) }()
	defer func() { stop(); <-done }()
	select {
	case id := <-started:
		t.Fatalf("harness %s was started a second time while its first run had not ended", id)
	case <-time.After(300 * time.Millisecond):
	}
	// The first run ends: now it runs, once, and completes.
	srv.mu.Lock()
	delete(srv.running, "w")
	delete(srv.cancels, "w")
	srv.mu.Unlock()
	srv.kick()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the harness was not run once its first run ended")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := srv.store.Restore("w")
		if err == nil && st.Status == statefmt.StatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the harness did not complete: %v %v", st.Status, err)
		}
	}
}
