package store_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/store"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/harness-edge/harness-edge/bridge"
)

// checkRecovered opens a store on fs (as after a restart) and checks it against the oracle:
// the state is exactly the oracle's for its checkpoint count, at least the acknowledged one,
// and verify finds nothing wrong.
func checkRecovered(t *testing.T, fs vfs.FS, oracle *crashOracle, acked int, what string) {
	t.Helper()
	s, err := store.OpenStore("store", store.StoreOptions{FS: fs, Policy: bridge.ChainPolicy{MaxReplay: 7}})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer s.Close()
	got, err := s.Restore("crash-harness")
	if err != nil {
		if acked > 0 {
			t.Fatalf("%s: restore after %d acknowledged checkpoints: %v", what, acked, err)
		}
		return
	}
	if n := got.CheckpointCount; n < acked || !reflect.DeepEqual(got, oracle.at(t, n)) {
		t.Fatalf("%s: restored checkpoint %d (acknowledged %d) differs from the oracle's", what, n, acked)
	}
	if probs, err := s.Verify(""); err != nil || len(probs) != 0 {
		t.Fatalf("%s: verify: %v %v", what, probs, err)
	}
}

// powerCuts runs write, rounds times, on a fresh store over Pebble's crashable in-memory file
// system, takes crash clones keeping random fractions of the unsynced data while it runs, and
// recovers each one: every checkpoint acknowledged before its clone was taken must be there.
// write calls ack with the count of checkpoints acknowledged so far; every 20, ack waits for a
// clone taken since (an in-memory store can finish the whole run before the cloner wakes, which
// would test nothing).
func powerCuts(t *testing.T, rounds int, seed uint64, write func(s *store.Store, ack func(n int)) error) {
	t.Helper()
	var oracle crashOracle
	for round := range rounds {
		mem := vfs.NewCrashableMem()
		s, err := store.OpenStore("store", store.StoreOptions{FS: mem, Policy: bridge.ChainPolicy{MaxReplay: 7}})
		if err != nil {
			t.Fatal(err)
		}
		var acked, taken atomic.Int64
		ack := func(n int) {
			acked.Store(int64(n))
			for n%20 == 0 && taken.Load() < int64(n/20) {
				time.Sleep(100 * time.Microsecond)
			}
		}
		done := make(chan error)
		go func() { done <- write(s, ack) }()
		r := rand.New(rand.NewPCG(uint64(round), seed))
		var clones []*vfs.MemFS
		var ackedAt []int
		for finished := false; !finished; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				finished = true
			default:
				a := int(acked.Load())
				clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: r.IntN(101), RNG: rand.New(rand.NewPCG(r.Uint64(), 1))}))
				ackedAt = append(ackedAt, a)
				taken.Add(1)
				time.Sleep(time.Duration(r.IntN(4000)) * time.Microsecond)
			}
		}
		s.Close()
		for i, c := range clones {
			checkRecovered(t, c, &oracle, ackedAt[i], fmt.Sprintf("round %d clone %d", round, i))
		}
		if len(clones) < 3 {
			t.Fatalf("round %d: only %d clones taken", round, len(clones))
		}
	}
}

// TestPowerLoss takes crash clones of Pebble's crashable in-memory file system while a writer
// checkpoints, keeping random fractions of the unsynced data, and recovers each one.
func TestPowerLoss(t *testing.T) {
	powerCuts(t, 6, 3, func(s *store.Store, ack func(int)) error {
		st := crashStart()
		for n := 1; n <= 60; n++ {
			crashStep(st, n)
			if _, err := s.Persist(st); err != nil {
				return err
			}
			ack(n)
		}
		return nil
	})
}

// TestInjectedIOErrors fails every file-system operation of a run in turn (Pebble's errorfs).
// Whatever the failure (an error from Persist, or Pebble giving up), a restart on the data that
// was synced recovers every acknowledged checkpoint.
func TestInjectedIOErrors(t *testing.T) {
	const steps = 12
	run := func(fs vfs.FS) (acked int, err error) {
		defer func() {
			if p := recover(); p != nil { // Pebble's Fatalf: the process would have died here
				err = fmt.Errorf("pebble fatal: %v", p)
			}
		}()
		s, err := store.OpenStore("store", store.StoreOptions{FS: fs, Policy: bridge.ChainPolicy{MaxReplay: 7}, ErrorLog: discard{}})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		st := crashStart()
		for n := 1; n <= steps; n++ {
			crashStep(st, n)
			if _, err := s.Persist(st); err != nil {
				return acked, err
			}
			acked = n
		}
		return acked, nil
	}
	var ops atomic.Int32
	counter := errorfs.InjectorFunc(func(errorfs.Op) error { ops.Add(1); return nil })
	if _, err := run(errorfs.Wrap(vfs.NewCrashableMem(), counter)); err != nil {
		t.Fatal(err)
	}
	total := int(ops.Load())
	var oracle crashOracle
	failed := 0
	for i := range total {
		mem := vfs.NewCrashableMem()
		acked, err := run(errorfs.Wrap(mem, errorfs.OnIndex(int32(i))))
		if err != nil {
			failed++
		}
		checkRecovered(t, mem.CrashClone(vfs.CrashCloneCfg{}), &oracle, acked, fmt.Sprintf("error at op %d of %d", i, total))
	}
	if failed == 0 {
		t.Fatalf("no injected error surfaced in %d runs", total)
	}
	t.Logf("%d operations, %d runs saw the injected error, every one recovered", total, failed)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
