package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/tools"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// runAheadTask reads a file at each of n steps, in a chain; with bash, each step also runs a
// command.
func runAheadTask(t *testing.T, n int, bash bool) string {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte(strings.Repeat("a line of notes\n", 50)), 0o600); err != nil {
		t.Fatal(err)
	}
	var steps, plan strings.Builder
	for i := 1; i <= n; i++ {
		cmd := ""
		if bash {
			cmd = ", {tool: bash, args: {command: 'echo hi'}}"
		}
		fmt.Fprintf(&steps, "        s%d: [{tool: read_file, args: {path: notes.md, offset: %d, limit: 3}}%s]\n", i, i, cmd)
		dep := ""
		if i > 1 {
			dep = fmt.Sprintf(", dependsOn: [s%d]", i-1)
		}
		fmt.Fprintf(&plan, "  - {id: s%d, description: read, agent: A%s}\n", i, dep)
	}
	return fmt.Sprintf("id: ahead\nagent: A\nautonomy: 5\nworkspace: {path: %s, shared: read-only}\nagents:\n  A:\n    driver: script\n    tools: [read_file, bash]\n    script:\n      steps:\n%splan:\n%s",
		ws, steps.String(), plan.String())
}

// aheadRun runs the task on a store over Pebble's crashable in-memory file system. At each
// checkpoint a sink hears of, it cuts the power on a copy of the file system (unsynced data
// lost) and checks that the copy holds that checkpoint; it counts the checkpoints heard of
// after the next one was already written (the next step ran while this one synced).
func aheadRun(t *testing.T, hooks tools.Hooks, bash bool) (ahead, heard int) {
	mem := vfs.NewCrashableMem()
	dir := "store"
	s, err := store.OpenStore(dir, store.StoreOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var problems []string
	sink := event.SinkFunc(func(e event.Event) {
		if e.Type != event.Checkpoint {
			return
		}
		heard++
		if idx, err := s.Index(e.HarnessID); err == nil && idx.HeadSeq > e.Seq {
			ahead++
		}
		c, err := store.OpenStore(dir, store.StoreOptions{FS: mem.CrashClone(vfs.CrashCloneCfg{})})
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		defer c.Close()
		if idx, err := c.Index(e.HarnessID); err != nil || idx.HeadSeq < e.Seq {
			problems = append(problems, fmt.Sprintf("checkpoint %d was announced; after a power cut the store holds %d (%v)", e.Seq, idx.HeadSeq, err))
		}
	})
	m := harness.NewManager(s, harness.Options{Clock: clock.RealClock{}, Sinks: []event.Sink{sink}, Hooks: hooks})
	h, err := m.Create(parseTask(t, runAheadTask(t, 8, bash)))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	if got := h.LastCheckpoint().Seq; got == 0 || h.State().Status != "completed" {
		t.Fatalf("status %s, last checkpoint %d", h.State().Status, got)
	}
	return ahead, heard
}

// A step of the in-process script driver starts while the checkpoint of the step before it
// syncs; nothing outside hears of a checkpoint before a power cut would keep it.
func TestAReadOnlyStepRunsWhileThePreviousCheckpointSyncs(t *testing.T) {
	ahead, heard := aheadRun(t, tools.Hooks{}, false)
	if ahead < 6 {
		t.Fatalf("%d of %d checkpoints were announced after the next one was written; want the 7 steps after the first", ahead, heard)
	}
}

// A tool hook may reach outside the process: each step then waits until the checkpoint before
// it is durable.
func TestAStepWithAToolHookWaitsForThePreviousCheckpoint(t *testing.T) {
	pass := func(context.Context, tools.ToolRequest) (tools.HookDecision, string) { return tools.HookContinue, "" }
	if ahead, heard := aheadRun(t, tools.Hooks{Pre: []tools.PreToolHook{pass}}, false); ahead != 0 {
		t.Fatalf("%d of %d checkpoints were announced after the next one was written", ahead, heard)
	}
}

// A step may start while the checkpoint before it syncs, but a call that may reach outside the
// process (bash here) waits until that checkpoint is durable.
func TestACallThatMayReachOutsideWaitsForThePreviousCheckpoint(t *testing.T) {
	if ahead, heard := aheadRun(t, tools.Hooks{}, true); ahead != 0 {
		t.Fatalf("%d of %d checkpoints were announced after the next one was written", ahead, heard)
	}
}
