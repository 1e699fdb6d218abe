package control

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// A gate approved in the instant between the harness stopping at it and its run ending (the
// scheduler still counts it as running, so it cannot be queued then) is resumed when that run
// ends: the harness completes instead of staying paused with nothing left to wait for.
func TestAGateApprovedAsItsRunEndsIsResumed(t *testing.T) {
	srv := daemonServer(t, 1)
	src := fmt.Sprintf(`id: g
agent: A
autonomy: 1
workspace: %s
agents:
  A:
    driver: script
    script: {steps: {"*": [{output: done}]}}
plan:
  - {id: build, description: build it, agent: A}
  - {id: ship, description: ship it, agent: A, dependsOn: [build]}
`, t.TempDir())
	if _, err := srv.Submit(context.Background(), Submission{Task: []byte(src), Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	// Each run that stops at a gate has the gate approved before it is over.
	approved := make(chan Decision, 8)
	srv.afterRun = func(id string) {
		gates, err := srv.m.PendingGates(id)
		if err != nil || len(gates) == 0 {
			return
		}
		d, err := srv.Decide(context.Background(), gates[0].HarnessID, gates[0].Gate.ID, true, "")
		if err != nil {
			t.Errorf("approve: %v", err)
		}
		approved <- d
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Schedule(ctx, 10*time.Second); close(done) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := srv.store.Restore("g")
		if err == nil && (st.Status == statefmt.StatusCompleted || st.Status == statefmt.StatusFailed) {
			if st.Status != statefmt.StatusCompleted {
				t.Fatalf("g ended %s (%s)", st.Status, st.StatusReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("g did not complete after its gate was approved: %s (%s), approvals %d", st.Status, st.StatusReason, len(approved))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(approved) != 2 {
		t.Fatalf("%d runs stopped at a gate, want 2 (one per step at autonomy 1)", len(approved))
	}
	for range 2 {
		if d := <-approved; !d.Resumed {
			t.Fatalf("the approval said the harness was not resumed: %+v", d)
		}
	}
}

// daemonServer is a server that owns a fresh store as a daemon does, running up to concurrency
// harnesses at once; the store closes with the test.
func daemonServer(t *testing.T, concurrency int) *Server {
	t.Helper()
	db, err := store.OpenStore(filepath.Join(t.TempDir(), "store"), store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return NewServer(db, Config{Owner: "daemon", Concurrency: concurrency})
}
