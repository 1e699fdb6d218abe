package harness_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/harness-edge/harness-edge/internal/fakeclock"
	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Recorder is a sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []event.Event
	hook   func(event.Event)
}

func (r *recorder) Emit(e event.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	hook := r.hook
	r.mu.Unlock()
	if hook != nil {
		hook(e)
	}
}

func (r *recorder) of(t event.Type) []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event.Event
	for _, e := range r.events {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

// ToolWarnings are the warnings about tool calls (hooks, doom loops): not the one the fallback
// backend adds when the engine is unavailable.
func (r *recorder) toolWarnings() []event.Event {
	var out []event.Event
	for _, e := range r.of(event.Warning) {
		if e.Tool != "" {
			out = append(out, e)
		}
	}
	return out
}

type env struct {
	t   *testing.T
	dir string
	// fs is the store's file system: Pebble's in-memory one unless a test needs the disk.
	fs    vfs.FS
	store *store.Store
	clock *fakeclock.Clock
	rec   *recorder
	m     *harness.Manager
	ids   int
}

// newEnv is a store (real Pebble, on its in-memory file system: these tests are about the
// harness, and the store's durability on disk has tests of its own), a fake clock and a
// manager; open again to simulate a restart.
func newEnv(t *testing.T) *env {
	e := &env{t: t, dir: t.TempDir(), fs: vfs.NewMem(), clock: fakeclock.New(), rec: &recorder{}}
	e.open()
	t.Cleanup(e.close)
	return e
}

// newDiskEnv is newEnv with the store on disk, for tests that look at the store's files.
func newDiskEnv(t *testing.T) *env {
	e := &env{t: t, dir: t.TempDir(), clock: fakeclock.New(), rec: &recorder{}}
	e.open()
	t.Cleanup(e.close)
	return e
}

// close closes the store, once: a property's case closes its own when it ends (a hundred
// cases' stores open until the test's end took gigabytes), and the test's cleanup closes what
// is left.
func (e *env) close() {
	if e.store != nil {
		e.store.Close()
		e.store, e.fs, e.m = nil, nil, nil
	}
}

// Open (re)opens the store and a fresh manager, as a restarted process does.
func (e *env) open() {
	if e.store != nil {
		e.store.Close()
	}
	dir := filepath.Join(e.dir, "store")
	if e.fs != nil {
		if err := e.fs.MkdirAll(dir, 0o700); err != nil {
			e.t.Fatal(err)
		}
	}
	s, err := store.OpenStore(dir, store.StoreOptions{FS: e.fs})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = s
	// Every start is checkpointed at once: under the fake clock a step's sleep passes at once,
	// and a start written by the timer (the default) would race the step's end. The default is
	// tested on the wall clock, and by every test that runs the binary.
	e.m = harness.NewManager(s, harness.Options{Clock: e.clock, Sinks: []event.Sink{e.rec}, StartCheckpoint: -1,
		NewID: func() string { e.ids++; return fmt.Sprintf("h-%04d", e.ids) }})
}

func parseTask(t *testing.T, src string) *task.Task {
	t.Helper()
	tk, err := task.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("task: %v", err)
	}
	if tk.Workspace.Path == task.DefaultWorkspace {
		tk.Workspace.Path = t.TempDir() // not the package directory: its harness locks it (and the tools write there)
	}
	return tk
}

// Comparable strips what legitimately differs between two runs of the same task: timestamps,
// durations and the number of checkpoints.
func comparable(s *statefmt.HarnessState) *statefmt.HarnessState {
	c, err := statefmt.DecodeBinary(mustEncode(s))
	if err != nil {
		panic(err)
	}
	var zero time.Time
	c.CreatedAt, c.UpdatedAt, c.LastCheckpointAt, c.CheckpointCount = zero, zero, nil, 0
	if c.Plan != nil {
		c.Plan.CreatedAt = zero
	}
	for i := range c.ToolCallHistory {
		c.ToolCallHistory[i].Timestamp, c.ToolCallHistory[i].Duration = zero, 0
	}
	if c.Budget != nil {
		c.Budget.WallClockUsed = 0
	}
	return c
}

func mustEncode(s *statefmt.HarnessState) []byte {
	b, err := statefmt.EncodeBinary(s)
	if err != nil {
		panic(err)
	}
	return b
}
