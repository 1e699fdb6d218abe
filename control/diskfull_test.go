package control_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/internal/tmpfs"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// daemonOnTmpfs starts a daemon on a store in a real 48 MiB tmpfs (mnt), which checks for room
// every 50 ms; stop stops it, once (the test's end does too).
func daemonOnTmpfs(t *testing.T) (mnt, dir string, log *logBuffer, stop func()) {
	t.Helper()
	mnt = tmpfs.Mount(t, "48m")
	dir = filepath.Join(mnt, "store")
	log = &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := control.StartDaemon(ctx, control.DaemonConfig{Dir: dir, Concurrency: 2, Grace: 20 * time.Second,
		Version: "test", Logger: slog.New(slog.NewTextHandler(log, nil)), RoomPoll: 50 * time.Millisecond})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); d.Wait() }) }
	t.Cleanup(stop)
	return mnt, dir, log, stop
}

// waitForRoom waits until the daemon lists harness id, and only it, as waiting for room.
func waitForRoom(t *testing.T, c *control.Conn, id string, log *logBuffer) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h, err := c.Health(context.Background())
		if err != nil {
			t.Fatalf("health with a full disk: %v", err)
		}
		if slices.Equal(h.WaitingForRoom, []string{id}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the harness never waited for room: %+v; log:\n%s", h, log)
		}
	}
}

// waitStatus waits up to limit for harness id to reach status want.
func waitStatus(t *testing.T, c *control.Conn, id string, want statefmt.Status, limit time.Duration, log *logBuffer) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		st, err := c.State(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("harness %s is %s (%q) after %v, want %s; log:\n%s", id, st.Status, st.StatusReason, limit, want, log)
		}
	}
}

// On a store whose disk fills up (a real 48 MiB tmpfs), the daemon pauses the harness with the
// reason, stays up and answers, goes on when space returns without anyone resuming it, and
// stops when asked; the harness completes every step once.
func TestDaemonPausesOnAFullDiskAndResumesWhenThereIsRoom(t *testing.T) {
	mnt, dir, log, stop := daemonOnTmpfs(t)

	const steps = 60
	src := scriptTaskSource(t, "full", steps, "30ms")
	c := connect(t, dir)
	if _, err := c.Submit(context.Background(), control.Submission{Task: []byte(src), Name: "full.yaml"}); err != nil {
		t.Fatal(err)
	}
	n := waitStepStarted(t, dir, "full", 0, log)
	waitStepStarted(t, dir, "full", n, log)

	// Leave 8 MiB: less than the 16 MiB a running harness's checkpoint must leave free, more
	// than a pause needs.
	filler := tmpfs.Fill(t, mnt, 8<<20)
	waitForRoom(t, c, "full", log)
	st, err := c.State(context.Background(), "full")
	if err != nil {
		t.Fatal(err)
	}
	if !harness.PausedForDiskFull(st) || !strings.Contains(st.StatusReason, "KiB free, a checkpoint needs") {
		t.Fatalf("with a full disk the harness is %s (%q)", st.Status, st.StatusReason)
	}
	done := 0
	for _, s := range st.Plan.Steps {
		if s.Status == statefmt.StepCompleted {
			done++
		}
	}
	if done == steps {
		t.Fatal("the plan finished before the disk filled: make it longer")
	}
	// It stays paused while the disk is full: no step runs, nothing loops.
	time.Sleep(300 * time.Millisecond)
	if again, err := c.State(context.Background(), "full"); err != nil || again.CheckpointCount != st.CheckpointCount {
		t.Fatalf("the harness moved on a full disk: %d checkpoints, then %d (%v)", st.CheckpointCount, again.CheckpointCount, err)
	}
	if l, err := c.List(context.Background()); err != nil || len(l) != 1 {
		t.Fatalf("ls with a full disk: %v %v", l, err)
	}
	if probs, err := c.Verify(context.Background(), ""); err != nil || len(probs) != 0 {
		t.Fatalf("verify with a full disk: %v %v", probs, err)
	}

	// Room again: it resumes by itself and completes, each step once.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, "full", statefmt.StatusCompleted, 60*time.Second, log)
	completed := map[string]int{}
	warned := 0
	err = c.Events(context.Background(), "full", 0, false, func(e event.Event) error {
		switch {
		case e.Type == event.StepCompleted:
			completed[e.StepID]++
		case e.Type == event.Warning && strings.Contains(e.Message, "disk is full"):
			warned++
		}
		return nil
	})
	if err != nil || len(completed) != steps || warned != 1 {
		t.Fatalf("events: %d steps completed, %d disk-full warnings (%v)", len(completed), warned, err)
	}
	for id, k := range completed {
		if k != 1 {
			t.Fatalf("step %s completed %d times", id, k)
		}
	}
	if probs, err := c.Verify(context.Background(), ""); err != nil || len(probs) != 0 {
		t.Fatalf("verify: %v %v", probs, err)
	}
	if !strings.Contains(log.String(), "the store has room again: resuming") {
		t.Fatalf("the log does not say the harness resumed:\n%s", log)
	}
	stop()
}

// A step that fills the disk to its last byte leaves even the pause refused: the harness stays
// running in the store. The daemon stays up, lists it as waiting for room, and resumes it from
// its last checkpoint once there is room, as it does a paused one; it completes.
func TestDaemonResumesAHarnessWhosePauseTheFullDiskRefused(t *testing.T) {
	mnt, dir, log, stop := daemonOnTmpfs(t)

	fill, filler := tmpfs.FillOnce(t, mnt, 0) // to its last byte
	src := tmpfs.FillingTask("brim", t.TempDir(), fill)
	c := connect(t, dir)
	if _, err := c.Submit(context.Background(), control.Submission{Task: []byte(src), Name: "brim.yaml"}); err != nil {
		t.Fatal(err)
	}
	waitForRoom(t, c, "brim", log)
	if !strings.Contains(log.String(), "even its pause was refused") {
		t.Fatalf("the pause was not refused (the test's disk was not full enough):\n%s", log)
	}
	listed := func() store.IndexEntry {
		t.Helper()
		l, err := c.List(context.Background())
		if err != nil || len(l) != 1 {
			t.Fatalf("list: %+v, %v", l, err)
		}
		return l[0]
	}
	if e := listed(); !e.WaitingForRoom || e.Status != statefmt.StatusRunning {
		t.Fatalf("the list says %s, waiting for room %v; want running and waiting for room", e.Status, e.WaitingForRoom)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, "brim", statefmt.StatusCompleted, 60*time.Second, log)
	if e := listed(); e.WaitingForRoom {
		t.Fatal("the list says a completed harness waits for room")
	}
	if probs, err := c.Verify(context.Background(), ""); err != nil || len(probs) != 0 {
		t.Fatalf("verify: %v %v", probs, err)
	}
	stop()
}

// A harness a person paused and resumed while the disk is full is queued, and its start is
// refused: the daemon lists it as waiting for room and starts it once there is room.
func TestDaemonStartsAResumedHarnessOnceTheFullDiskHasRoom(t *testing.T) {
	mnt, dir, log, stop := daemonOnTmpfs(t)
	c := connect(t, dir)
	if _, err := c.Submit(context.Background(), control.Submission{Task: []byte(scriptTaskSource(t, "q", 60, "30ms")), Name: "q.yaml"}); err != nil {
		t.Fatal(err)
	}
	n := waitStepStarted(t, dir, "q", 0, log)
	waitStepStarted(t, dir, "q", n, log)
	if err := c.Pause(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, "q", statefmt.StatusPaused, 30*time.Second, log)
	// Leave 8 MiB: room for the queued mark (a settling checkpoint), not for the start.
	filler := tmpfs.Fill(t, mnt, 8<<20)
	if err := c.Resume(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
	waitForRoom(t, c, "q", log)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, "q", statefmt.StatusCompleted, 60*time.Second, log)
	stop()
}
