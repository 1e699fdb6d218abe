package control

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// A daemon that stops just after it scheduled a harness, before the harness's Run began, leaves
// it paused for the next daemon (it does not run on through the grace period into a closed
// store), whether the harness was created or interrupted (running in the store).
func TestShutdownPausesAHarnessScheduledBeforeItsRunBegan(t *testing.T) {
	for _, from := range []statefmt.Status{statefmt.StatusCreated, statefmt.StatusRunning} {
		t.Run(string(from), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			db, err := store.OpenStore(dir, store.StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { db.Close() }()
			srv := NewServer(db, Config{Owner: "daemon", Concurrency: 1})
			src := fmt.Sprintf(`id: q
agent: A
workspace: %s
agents:
  A:
    driver: script
    script: {steps: {"*": [{sleep: 200ms}, {output: done}]}}
plan:
  - {id: s0, description: one, agent: A}
  - {id: s1, description: two, agent: A, dependsOn: [s0]}
  - {id: s2, description: three, agent: A, dependsOn: [s1]}
`, t.TempDir())
			if from == statefmt.StatusRunning {
				// Interrupted: running in the store, as a crashed daemon leaves it.
				h, err := srv.m.Create(mustTask(t, src))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				go func() { time.Sleep(50 * time.Millisecond); cancel() }()
				_ = h.Run(ctx)
				srv.m.Release("q")
				st, err := db.Restore("q")
				if err != nil {
					t.Fatal(err)
				}
				st.Status, st.StatusReason = statefmt.StatusRunning, ""
				if _, err := db.PersistWith(st, store.Extras{}); err != nil {
					t.Fatal(err)
				}
				db.Release("q")
				srv.enqueue("q")
			} else if _, err := srv.Submit(context.Background(), Submission{Task: []byte(src), Dir: t.TempDir()}); err != nil {
				t.Fatal(err)
			}
			// The scheduled run waits until the daemon is stopping: the window between scheduling
			// and Run, made wide.
			srv.beforeRun = func(string) {
				for {
					srv.mu.Lock()
					closing := srv.closing
					srv.mu.Unlock()
					if closing {
						time.Sleep(20 * time.Millisecond) // shutdown has sent its pauses
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			start := time.Now()
			go func() { srv.Schedule(ctx, 10*time.Second); close(done) }()
			waitScheduled(srv, "q")
			stop()
			<-done
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the shutdown waited %v: the harness ran on", took)
			}
			st, err := db.Restore("q")
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != statefmt.StatusPaused || st.StatusReason != harness.ReasonShutdown {
				t.Fatalf("after the shutdown q is %s (%s), want paused (%s)", st.Status, st.StatusReason, harness.ReasonShutdown)
			}
			// The next daemon resumes it.
			db.Close()
			db, err = store.OpenStore(dir, store.StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids, err := NewServer(db, Config{Owner: "daemon"}).Recover()
			if err != nil || !slices.Contains(ids, "q") {
				t.Fatalf("the next daemon queues %v (%v), want q", ids, err)
			}
		})
	}
}

// waitScheduled waits until the daemon's scheduler has taken id from its queue to run.
func waitScheduled(srv *Server, id string) {
	for {
		srv.mu.Lock()
		scheduled := srv.running[id]
		srv.mu.Unlock()
		if scheduled {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func mustTask(t *testing.T, src string) *task.Task {
	t.Helper()
	tk, err := task.Parse("q.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// A paused harness the daemon queued to resume, behind one that holds its only slot, is queued
// again by the next daemon when this one stops before running it; paused again while queued, it
// is not.
func TestAQueuedResumeOutlivesTheDaemon(t *testing.T) {
	for _, pausedAgain := range []bool{false, true} {
		t.Run(fmt.Sprintf("paused again: %v", pausedAgain), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			db, err := store.OpenStore(dir, store.StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { db.Close() }()
			srv := NewServer(db, Config{Owner: "daemon", Concurrency: 1})
			task := func(id, sleep string) string {
				return fmt.Sprintf(`id: %s
agent: A
workspace: %s
agents:
  A:
    driver: script
    script: {steps: {"*": [{sleep: %s}, {output: done}]}}
plan:
  - {id: s0, description: one, agent: A}
  - {id: s1, description: two, agent: A, dependsOn: [s0]}
`, id, t.TempDir(), sleep)
			}
			// p: started, then paused by a person while it runs.
			h, err := srv.m.Create(mustTask(t, task("p", "300ms")))
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan error, 1)
			go func() { ran <- h.Run(context.Background()) }()
			for h.Status() != statefmt.StatusRunning {
				time.Sleep(time.Millisecond)
			}
			if err := srv.m.Pause("p", ReasonRequested); err != nil {
				t.Fatal(err)
			}
			<-ran
			srv.m.Release("p")
			if st, _ := db.Restore("p"); st.Status != statefmt.StatusPaused || st.StatusReason != ReasonRequested {
				t.Fatalf("p is %s (%s), want paused (%s)", st.Status, st.StatusReason, ReasonRequested)
			}
			// busy takes the daemon's only slot; p's resume waits in the queue.
			if _, err := srv.Submit(context.Background(), Submission{Task: []byte(task("busy", "10s")), Dir: t.TempDir()}); err != nil {
				t.Fatal(err)
			}
			sctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { srv.Schedule(sctx, 10*time.Second); close(done) }()
			waitScheduled(srv, "busy")
			if err := srv.Resume(context.Background(), "p"); err != nil {
				t.Fatal(err)
			}
			if pausedAgain {
				if err := srv.Pause(context.Background(), "p"); err != nil {
					t.Fatal(err)
				}
			}
			stop()
			<-done
			db.Close()
			db, err = store.OpenStore(dir, store.StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids, err := NewServer(db, Config{Owner: "daemon"}).Recover()
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(ids, "p"); got == pausedAgain {
				st, _ := db.Restore("p")
				t.Fatalf("the next daemon queues %v; p is %s (%s)", ids, st.Status, st.StatusReason)
			}
			if !slices.Contains(ids, "busy") {
				t.Fatalf("the next daemon queues %v, want busy (paused by the shutdown) among them", ids)
			}
		})
	}
}
