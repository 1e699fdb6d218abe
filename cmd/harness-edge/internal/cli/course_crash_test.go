package cli

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// courseOp is a change of course run in a child process that a test kills.
type courseOp struct {
	name string
	args []string
	// check looks at the store after the process ended, killed or not: the change is there
	// whole or not at all, and there when it was acknowledged (exit 0).
	check func(t *testing.T, s *store.Store, acked bool) (applied bool)
}

// present reports whether a harness is in the store whole (index, state, task, events) or gone
// whole; anything in between fails the test.
func present(t *testing.T, s *store.Store, id string) bool {
	t.Helper()
	_, ierr := s.Index(id)
	_, terr := s.Task(id)
	n := 0
	_ = s.Events(id, 0, func(event.Event) bool { n++; return true })
	switch {
	case ierr == nil && terr == nil && n > 0:
		if _, err := s.Restore(id); err != nil {
			t.Fatalf("harness %s is listed but does not restore: %v", id, err)
		}
		return true
	case errors.Is(ierr, store.ErrNotFound) && errors.Is(terr, store.ErrNotFound) && n == 0:
		return false
	}
	t.Fatalf("harness %s is half there: index %v, task %v, %d events", id, ierr, terr, n)
	return false
}

// courseEvents counts a harness's course events with this action.
func courseEvents(s *store.Store, id, action string) int {
	n := 0
	_ = s.Events(id, 0, func(e event.Event) bool {
		if e.Type == event.Course && e.Action == action {
			n++
		}
		return true
	})
	return n
}

// SIGKILL at random instants during retry, replan, rollback, delete and prune (real processes, a store
// on disk): after each kill the store opens, verify passes, every change is there whole or not
// at all (a retried harness is paused with its course event, or failed without it; a deleted
// harness is gone with its task and events, or all there; a prune removes all it matched or
// none), and nothing a command acknowledged (exit 0) is lost.
func TestKill9DuringChangesOfCourse(t *testing.T) {
	dir := t.TempDir()
	template := filepath.Join(dir, "template")
	expectIn(t, template, ExitError, "compiler not found", "run", writeTask(t, dir, "r.yaml", strings.ReplaceAll(flakyTask, "%s", "r")))
	expectIn(t, template, ExitWaiting, "approve k g1", "run", writeTask(t, dir, "k.yaml", strings.ReplaceAll(gatedTask, "%s", "k")))
	expectIn(t, template, ExitOK, "rejected", "reject", "k", "--reason", "no")
	expectIn(t, template, ExitOK, "named pre", "checkpoint", "k", "--name", "pre")
	for _, id := range []string{"old1", "old2", "old3"} {
		expectIn(t, template, ExitOK, "completed", "run", writeTask(t, dir, id+".yaml", bulkyTask(id, 4, "")))
	}
	change := writeTask(t, dir, "skip.yaml", "skip: [ship]\n")
	ops := []courseOp{
		{"retry", []string{"retry", "r", "--reason", "again"}, func(t *testing.T, s *store.Store, acked bool) bool {
			st, err := s.Restore("r")
			if err != nil {
				t.Fatal(err)
			}
			applied := st.Status == statefmt.StatusPaused
			if applied != (courseEvents(s, "r", "retry") == 1) || !applied && st.Status != statefmt.StatusFailed {
				t.Fatalf("retry half applied: status %s, %d course events", st.Status, courseEvents(s, "r", "retry"))
			}
			return applied
		}},
		{"replan", []string{"replan", "k", change}, func(t *testing.T, s *store.Store, acked bool) bool {
			st, err := s.Restore("k")
			if err != nil {
				t.Fatal(err)
			}
			applied := st.Plan.Steps[1].Status == statefmt.StepCompleted
			if applied != (courseEvents(s, "k", "replan") == 1) {
				t.Fatalf("replan half applied: ship %s, %d course events", st.Plan.Steps[1].Status, courseEvents(s, "k", "replan"))
			}
			return applied
		}},
		{"rollback", []string{"rollback", "k", "--to", "pre"}, func(t *testing.T, s *store.Store, acked bool) bool {
			st, err := s.Restore("k")
			if err != nil {
				t.Fatal(err)
			}
			applied := strings.HasPrefix(st.StatusReason, "rolled back to")
			if applied != (courseEvents(s, "k", "rollback") == 1) {
				t.Fatalf("rollback half applied: reason %q, %d course events", st.StatusReason, courseEvents(s, "k", "rollback"))
			}
			return applied
		}},
		{"delete", []string{"delete", "old1"}, func(t *testing.T, s *store.Store, acked bool) bool {
			return !present(t, s, "old1")
		}},
		{"prune", []string{"prune", "--older-than", "0s", "--status", "completed"}, func(t *testing.T, s *store.Store, acked bool) bool {
			a, b, c := present(t, s, "old1"), present(t, s, "old2"), present(t, s, "old3")
			if a != b || b != c || !present(t, s, "r") || !present(t, s, "k") {
				t.Fatalf("prune half applied: old1 %v old2 %v old3 %v", a, b, c)
			}
			return !a
		}},
	}
	// How long each operation takes unkilled (process start included): the kills are spread
	// over that time.
	took := map[string]time.Duration{}
	for _, op := range ops {
		db := filepath.Join(dir, "measure-"+op.name)
		copyTree(t, template, db)
		start := time.Now()
		expectIn(t, db, ExitOK, "", op.args...)
		took[op.name] = time.Since(start)
	}
	runs := 40
	if testing.Short() {
		runs = 15
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	killed, acked := map[string]int{}, map[string]int{}
	for i := range runs {
		op := ops[i%len(ops)]
		db := filepath.Join(dir, fmt.Sprintf("run%d", i))
		copyTree(t, template, db)
		cmd := child(append([]string{"--store", db}, op.args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(r.Int64N(int64(took[op.name]) * 13 / 10)))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		ok := !ws.Signaled() && cmd.ProcessState.ExitCode() == ExitOK
		if ws.Signaled() {
			killed[op.name]++
		}
		if ok {
			acked[op.name]++
		}
		if code, out := binary(t, db, "verify"); code != ExitOK {
			t.Fatalf("%s killed: verify exits %d:\n%s", op.name, code, out)
		}
		s, err := store.OpenStore(db, store.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		applied := op.check(t, s, ok)
		s.Close()
		if ok && !applied {
			t.Fatalf("%s was acknowledged, and lost after the process ended", op.name)
		}
		_ = os.RemoveAll(db)
	}
	t.Logf("%d runs: killed %v; acknowledged %v", runs, killed, acked)
}
