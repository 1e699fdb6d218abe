package store_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/reexec"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

const crashSeed = 77

// crashState is the oracle: the state after n steps is a pure function of n.
type crashOracle struct{ states []*statefmt.HarnessState }

func crashStep(s *statefmt.HarnessState, n int) {
	r := rand.New(rand.NewPCG(crashSeed, uint64(n)))
	s.ToolCallHistory = append(s.ToolCallHistory, stategen.ReferenceRecord(r, s.CreatedAt.Add(time.Duration(n)*time.Second)))
	s.TotalToolCalls = len(s.ToolCallHistory)
	s.CheckpointCount = n
	s.UpdatedAt = s.CreatedAt.Add(time.Duration(n) * time.Second)
	statefmt.Normalize(s)
}

func crashStart() *statefmt.HarnessState {
	s := stategen.Reference(rand.New(rand.NewPCG(crashSeed, 0)), 3000)
	s.HarnessID = "crash-harness"
	s.CheckpointCount = 0
	return s
}

func (o *crashOracle) at(t *testing.T, n int) *statefmt.HarnessState {
	if o.states == nil {
		o.states = []*statefmt.HarnessState{clone(t, crashStart())}
	}
	for len(o.states) <= n {
		s := clone(t, o.states[len(o.states)-1])
		crashStep(s, len(o.states))
		o.states = append(o.states, s)
	}
	return o.states[n]
}

// TestMain runs the child side of TestCrashKill9 when the parent starts this binary with
// HARNESS_EDGE_CRASH_CHILD set: it continues the harness from the store and prints "ack N" after
// every durable checkpoint, until it is killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("HARNESS_EDGE_CRASH_CHILD"); dir != "" {
		crashChild(dir)
	}
	if dir := os.Getenv("HARNESS_EDGE_HEADS_CHILD"); dir != "" {
		headsChild(dir)
	}
	os.Exit(m.Run())
}

func crashChild(dir string) {
	s, err := store.OpenStore(dir, store.StoreOptions{Policy: bridge.ChainPolicy{MaxReplay: 25}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	st, err := s.Restore("crash-harness")
	if err != nil {
		st = crashStart()
	}
	for n := st.CheckpointCount + 1; ; n++ {
		crashStep(st, n)
		if _, err := s.PersistWith(st, store.Extras{Events: []event.Event{{Type: event.Checkpoint, HarnessID: st.HarnessID, Message: fmt.Sprint(n)}}}); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Printf("ack %d\n", n)
	}
}

// TestCrashKill9 kills a child that checkpoints in a loop with SIGKILL at random instants
// (HARNESS_EDGE_CRASH_KILLS times, default 50) and checks after each kill: the restored state is
// exactly the oracle's state for its checkpoint count, never older than the last acknowledged
// checkpoint, its event log holds exactly one event per checkpoint, and verify finds nothing
// wrong.
func TestCrashKill9(t *testing.T) {
	kills := 50
	if v, err := strconv.Atoi(os.Getenv("HARNESS_EDGE_CRASH_KILLS")); err == nil {
		kills = v
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var oracle crashOracle
	lastAck, maxSeen := 0, 0
	for k := range kills {
		cmd := reexec.Command("HARNESS_EDGE_CRASH_CHILD", dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		acksWanted := r.IntN(20)
		acks := 0
		for acks < acksWanted && sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "ack "); ok {
				lastAck, _ = strconv.Atoi(n)
				acks++
			} else if strings.HasPrefix(line, "error") {
				t.Fatalf("child: %s", line)
			}
		}
		// Kill somewhere inside the next checkpoint (or between two).
		time.Sleep(time.Duration(r.IntN(1500)) * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		// Acks printed before the kill landed still count.
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				lastAck, _ = strconv.Atoi(n)
			}
		}
		_ = cmd.Wait()

		s, err := store.OpenStore(dir, store.StoreOptions{Policy: bridge.ChainPolicy{MaxReplay: 25}})
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
		}
		got, err := s.Restore("crash-harness")
		if err != nil && lastAck > 0 {
			t.Fatalf("kill %d: restore after %d acknowledged checkpoints: %v", k, lastAck, err)
		}
		if err == nil {
			n := got.CheckpointCount
			if n < lastAck {
				t.Fatalf("kill %d: restored checkpoint %d, but %d was acknowledged", k, n, lastAck)
			}
			if n > lastAck+1 {
				t.Fatalf("kill %d: restored checkpoint %d, only %d acknowledged (at most one may be in flight)", k, n, lastAck)
			}
			if !reflect.DeepEqual(got, oracle.at(t, n)) {
				t.Fatalf("kill %d: state at checkpoint %d differs from the oracle's", k, n)
			}
			// Each checkpoint's event is in its batch: the log holds exactly one per checkpoint.
			var events []string
			if err := s.Events("crash-harness", 0, func(e event.Event) bool {
				events = append(events, fmt.Sprintf("%d=%s", e.N, e.Message))
				return true
			}); err != nil {
				t.Fatalf("kill %d: events: %v", k, err)
			}
			if len(events) != n || (n > 0 && events[n-1] != fmt.Sprintf("%d=%d", n, n)) {
				t.Fatalf("kill %d: %d events for %d checkpoints (last %v)", k, len(events), n, events[max(0, len(events)-1):])
			}
			maxSeen = max(maxSeen, n)
			lastAck = n // the child continues from here
		}
		if probs, err := s.Verify(""); err != nil || len(probs) != 0 {
			t.Fatalf("kill %d: verify: %v %v", k, probs, err)
		}
		s.Close()
	}
	if maxSeen < kills/2 {
		t.Fatalf("only %d checkpoints in %d runs: the kills came too early to test anything", maxSeen, kills)
	}
	t.Logf("%d kills, %d checkpoints acknowledged and restored", kills, maxSeen)
}
