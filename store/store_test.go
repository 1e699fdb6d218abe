package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
)

func openStore(t *testing.T, dir string, e bridge.Engine, p bridge.ChainPolicy) *store.Store {
	t.Helper()
	s, err := store.OpenStore(dir, store.StoreOptions{Engine: e, Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// step advances a reference state by one step: one tool call appended, counters bumped.
func step(r *rand.Rand, s *statefmt.HarnessState) {
	s.ToolCallHistory = append(s.ToolCallHistory, stategen.ReferenceRecord(r, s.UpdatedAt))
	s.TotalToolCalls = len(s.ToolCallHistory)
	s.CheckpointCount++
	s.UpdatedAt = s.UpdatedAt.Add(time.Second)
	statefmt.Normalize(s)
}

func clone(t *testing.T, s *statefmt.HarnessState) *statefmt.HarnessState {
	t.Helper()
	b, err := statefmt.EncodeBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := statefmt.DecodeBinary(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPropertyPersistRestore is the persist/restore property on every loadable engine: persisting any
// state and restoring it gives the same state, also after the store is reopened.
func TestPropertyPersistRestore(t *testing.T) {
	engines, _ := bridge.Available()
	for _, e := range engines {
		t.Run(string(e.Backend()), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, e, bridge.ChainPolicy{})
			defer func() { s.Close() }()
			p := gopter.DefaultTestParametersWithSeed(5)
			p.MinSuccessfulTests = 100
			ps := gopter.NewProperties(p)
			ps.Property("Restore(Persist(s)) == s", prop.ForAll(func(seed uint64) bool {
				r := rand.New(rand.NewPCG(seed, 2))
				st := stategen.State(r, stategen.Small)
				for i := range 3 {
					if i > 0 {
						step(r, st)
					}
					if _, err := s.Persist(st); err != nil {
						t.Log(err)
						return false
					}
					got, err := s.Restore(st.HarnessID)
					if err != nil || !reflect.DeepEqual(got, st) {
						t.Logf("restore: %v", err)
						return false
					}
				}
				return true
			}, gen.UInt64()))
			ps.TestingRun(t)
			// Everything survives a reopen.
			list, err := s.List()
			if err != nil || len(list) < 100 {
				t.Fatalf("List: %d entries, %v", len(list), err)
			}
			s.Close()
			s = openStore(t, dir, e, bridge.ChainPolicy{})
			for _, entry := range list[:10] {
				st, err := s.Restore(entry.ID)
				if err != nil || st.HarnessID != entry.ID || entry.HeadSeq != 3 {
					t.Fatalf("after reopen: %v (%+v)", err, entry)
				}
			}
			if probs, err := s.Verify(""); err != nil || len(probs) != 0 {
				t.Fatalf("Verify: %v %v", probs, err)
			}
		})
	}
}

func TestStoreChainContinuesAcrossReopenAndReleasesOldRecords(t *testing.T) {
	e, _ := bridge.Load()
	dir := t.TempDir()
	policy := bridge.ChainPolicy{MaxReplay: 10}
	s := openStore(t, dir, e, policy)
	r := rand.New(rand.NewPCG(1, 1))
	st := stategen.Reference(r, 20_000)
	var kinds []statefmt.RecordKind
	for i := range 25 {
		if i == 12 { // reopen mid-chain: the next record must continue the chain
			s.Close()
			s = openStore(t, dir, e, policy)
		}
		step(r, st)
		cp, err := s.Persist(st)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Seq != uint64(i+1) {
			t.Fatalf("checkpoint %d has seq %d", i+1, cp.Seq)
		}
		kinds = append(kinds, cp.Kind)
	}
	defer s.Close()
	got, err := s.Restore(st.HarnessID)
	if err != nil || !reflect.DeepEqual(got, clone(t, st)) {
		t.Fatalf("restore: %v", err)
	}
	recs, err := s.Inspect(st.HarnessID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Backend() != bridge.BackendFallback {
		if kinds[0] != statefmt.KindKeyframe || kinds[11] != statefmt.KindKeyframe || kinds[22] != statefmt.KindKeyframe || kinds[5] != statefmt.KindDelta {
			t.Fatalf("kinds %v: want keyframes at 1, 12 (after reopen the encoder restarts) and 23", kinds)
		}
		if recs[0].Seq != 23 || len(recs) != 3 {
			t.Fatalf("retained records start at %d (%d records), want 23..25", recs[0].Seq, len(recs))
		}
	} else if len(recs) != 1 || recs[0].Seq != 25 {
		t.Fatalf("fallback: retained %d records from %d, want only the head keyframe", len(recs), recs[0].Seq)
	}
	if _, err := s.RestoreAt(st.HarnessID, 5); err == nil || !strings.Contains(err.Error(), "no longer stored") {
		t.Fatalf("RestoreAt a released record: %v", err)
	}
}

func TestStoreIsOneProcessAtATime(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, bridge.Fallback(), bridge.ChainPolicy{})
	_, err := store.OpenStore(dir, store.StoreOptions{Engine: bridge.Fallback()})
	if !errors.Is(err, store.ErrStoreInUse) || !strings.Contains(err.Error(), "in use by pid") {
		t.Fatalf("second open: %v", err)
	}
	s.Close()
	s = openStore(t, dir, bridge.Fallback(), bridge.ChainPolicy{})
	s.Close()
}

func TestStoreNotFoundAndBadIDs(t *testing.T) {
	s := openStore(t, t.TempDir(), bridge.Fallback(), bridge.ChainPolicy{})
	defer s.Close()
	if _, err := s.Restore("nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Restore of an unknown harness: %v", err)
	}
	st := stategen.State(rand.New(rand.NewPCG(1, 2)), stategen.Small)
	st.HarnessID = "../escape"
	if _, err := s.Persist(st); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("bad id accepted: %v", err)
	}
}

func TestStoreDeleteAndList(t *testing.T) {
	s := openStore(t, t.TempDir(), bridge.Fallback(), bridge.ChainPolicy{})
	defer s.Close()
	r := rand.New(rand.NewPCG(3, 4))
	a, b := stategen.State(r, stategen.Small), stategen.State(r, stategen.Small)
	for _, st := range []*statefmt.HarnessState{a, b} {
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(a.HarnessID); err != nil {
		t.Fatal(err)
	}
	list, _ := s.List()
	if len(list) != 1 || list[0].ID != b.HarnessID {
		t.Fatalf("after delete: %+v", list)
	}
	if _, err := s.Restore(a.HarnessID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted harness restored: %v", err)
	}
}

// TestStoreChainsCrossBackends: a store written by one backend is restored and continued by
// every other.
func TestStoreChainsCrossBackends(t *testing.T) {
	engines, _ := bridge.Available()
	for _, w := range engines {
		for _, rd := range engines {
			dir := t.TempDir()
			s := openStore(t, dir, w, bridge.ChainPolicy{})
			r := rand.New(rand.NewPCG(7, 7))
			st := stategen.Reference(r, 10_000)
			for range 5 {
				step(r, st)
				if _, err := s.Persist(st); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			s = openStore(t, dir, rd, bridge.ChainPolicy{})
			got, err := s.Restore(st.HarnessID)
			if err != nil || !reflect.DeepEqual(got, clone(t, st)) {
				t.Fatalf("%s store restored by %s: %v", w.Backend(), rd.Backend(), err)
			}
			step(r, st)
			if _, err := s.Persist(st); err != nil {
				t.Fatalf("%s continuing %s's chain: %v", rd.Backend(), w.Backend(), err)
			}
			if probs, _ := s.Verify(""); len(probs) != 0 {
				t.Fatalf("%s then %s: %v", w.Backend(), rd.Backend(), probs)
			}
			s.Close()
		}
	}
}

// A keyframe larger than one frame is stored as independent zstd frames (decompressed in
// parallel); it restores exactly after a reopen, with deltas after it, on every backend.
func TestStoreLargeKeyframeInFrames(t *testing.T) {
	engines, _ := bridge.Available()
	for _, e := range engines {
		t.Run(string(e.Backend()), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, e, bridge.ChainPolicy{})
			r := rand.New(rand.NewPCG(7, 7))
			st := stategen.Reference(r, 9_000_000)
			for range 3 {
				step(r, st)
				if _, err := s.Persist(st); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			s = openStore(t, dir, e, bridge.ChainPolicy{})
			defer s.Close()
			got, err := s.Restore(st.HarnessID)
			if err != nil || !reflect.DeepEqual(got, clone(t, st)) {
				t.Fatalf("restore after reopen: %v", err)
			}
			recs, err := s.Inspect(st.HarnessID)
			if err != nil {
				t.Fatal(err)
			}
			if recs[0].Compression != statefmt.CompressionZstdFrames || recs[0].RawLen < 8_500_000 {
				t.Fatalf("first record: %v, %d bytes; want a zstd-frames keyframe of the whole state", recs[0].Compression, recs[0].RawLen)
			}
			if problems, err := s.Verify(st.HarnessID); err != nil || len(problems) != 0 {
				t.Fatalf("verify: %v %v", problems, err)
			}
		})
	}
}

// A keyframe written because the deltas since the last one reached the replay bound is a fresh
// encoding of the state: it holds none of the earlier versions of the steps that the encoder
// kept between them, which a finished harness would otherwise keep for good.
func TestAKeyframeAtTheReplayBoundIsAFreshEncoding(t *testing.T) {
	e, _ := bridge.Load()
	if e.Backend() == bridge.BackendFallback {
		t.Skip("the fallback backend writes every record as a keyframe; the replay bound is the engine's")
	}
	s := openStore(t, t.TempDir(), e, bridge.ChainPolicy{MaxReplay: 8})
	defer s.Close()
	r := rand.New(rand.NewPCG(8, 8))
	st := stategen.Reference(r, 20_000)
	keyframes := 0
	for i := range 30 {
		step(r, st)
		// The running step changes at every checkpoint, as a run's steps do.
		st.Plan.Steps[1].Attempts = i
		cp, err := s.Persist(st)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Kind != statefmt.KindKeyframe || cp.Seq == 1 {
			continue
		}
		keyframes++
		full, err := statefmt.EncodeBinary(st)
		if err != nil {
			t.Fatal(err)
		}
		if cp.StateBytes != len(full) {
			t.Fatalf("keyframe %d holds %d bytes, a fresh encoding %d", cp.Seq, cp.StateBytes, len(full))
		}
	}
	if keyframes != 3 {
		t.Fatalf("%d keyframes after the first in 30 checkpoints, want 3 (every 9th)", keyframes)
	}
	if got, err := s.Restore(st.HarnessID); err != nil || !reflect.DeepEqual(got, clone(t, st)) {
		t.Fatalf("restore: %v", err)
	}
}

func TestStoreEventLog(t *testing.T) {
	e, _ := bridge.Load()
	dir := t.TempDir()
	s := openStore(t, dir, e, bridge.ChainPolicy{})
	r := rand.New(rand.NewPCG(3, 9))
	st := stategen.Reference(r, 2_000)
	ev := func(s string) event.Event {
		return event.Event{Type: event.Warning, HarnessID: st.HarnessID, Message: s}
	}
	if _, err := s.PersistWith(st, store.Extras{Events: []event.Event{ev("a"), ev("b")}, Task: []byte(`{"agent":"M"}`)}); err != nil {
		t.Fatal(err)
	}
	if task, err := s.Task(st.HarnessID); err != nil || string(task) != `{"agent":"M"}` {
		t.Fatalf("task: %q %v", task, err)
	}
	if n, err := s.AppendEvents(st.HarnessID, []event.Event{ev("c")}); err != nil || n != 3 {
		t.Fatalf("append: first %d, %v; want 3", n, err)
	}
	// Refused events change nothing: no checkpoint, no event.
	other := ev("d")
	other.HarnessID = "someone-else"
	if _, err := s.PersistWith(st, store.Extras{Events: []event.Event{ev("d"), other}}); err == nil || !strings.Contains(err.Error(), `event 1 (warning) belongs to harness "someone-else"`) {
		t.Fatalf("another harness's event: %v", err)
	}
	huge := ev(strings.Repeat("x", event.MaxBytes))
	if _, err := s.AppendEvents(st.HarnessID, []event.Event{huge}); err == nil {
		t.Fatal("oversized event accepted")
	}
	s.Close()
	s = openStore(t, dir, e, bridge.ChainPolicy{})
	defer s.Close()
	step(r, st)
	cp, err := s.PersistWith(st, store.Extras{Events: []event.Event{ev("d")}, Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: st.HarnessID}})
	if err != nil || cp.Seq != 2 || len(cp.Events) != 2 || cp.Events[0].N != 4 {
		t.Fatalf("after reopen: checkpoint %d, events %+v, %v; want 2 and 4, 5", cp.Seq, cp.Events, err)
	}
	if c := cp.Events[1]; c.N != 5 || c.Type != event.Checkpoint || c.Seq != 2 || c.StoredBytes != cp.StoredBytes || c.Kind != cp.Kind.String() {
		t.Fatalf("the checkpoint's own event: %+v for %+v", c, cp)
	}
	var got []string
	collect := func(after uint64) {
		got = nil
		if err := s.Events(st.HarnessID, after, func(e event.Event) bool {
			got = append(got, fmt.Sprintf("%d%s", e.N, e.Message))
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	collect(0)
	want := []string{"1a", "2b", "3c", "4d", "5"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	collect(2)
	if !reflect.DeepEqual(got, want[2:]) {
		t.Fatalf("events after 2: %v", got)
	}
	if err := s.Delete(st.HarnessID); err != nil {
		t.Fatal(err)
	}
	if collect(0); len(got) != 0 {
		t.Fatalf("events after delete: %v", got)
	}
	if _, err := s.Task(st.HarnessID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("task after delete: %v", err)
	}
}

// Release drops a harness's in-memory chain while other goroutines persist and restore it: the
// chain goes on from disk, with no gap and no use of a closed chain (run it with -race).
func TestStoreReleaseUnderConcurrentUse(t *testing.T) {
	e, _ := bridge.Load()
	s := openStore(t, t.TempDir(), e, bridge.ChainPolicy{MaxReplay: 10})
	defer s.Close()
	r := rand.New(rand.NewPCG(3, 3))
	st := stategen.Reference(r, 20_000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // restore and release, over and over
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Restore(st.HarnessID); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Error(err)
				return
			}
			s.Release(st.HarnessID)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				s.Release(st.HarnessID)
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	for i := range 40 {
		step(r, st)
		cp, err := s.Persist(st)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Seq != uint64(i+1) {
			t.Fatalf("checkpoint %d has seq %d", i+1, cp.Seq)
		}
	}
	close(stop)
	wg.Wait()
	s.Release(st.HarnessID)
	got, err := s.Restore(st.HarnessID)
	if err != nil || !reflect.DeepEqual(got, clone(t, st)) {
		t.Fatalf("restore after release: %v", err)
	}
	if probs, err := s.Verify(st.HarnessID); err != nil || len(probs) > 0 {
		t.Fatalf("verify: %v %v", probs, err)
	}
}

// A harness that stops (paused, failed, completed) gives back its delta compressor: the next
// delta starts a new zstd stream, and the chain restores and verifies whole, before and after a
// reopen.
// A harness that completes or fails keeps the checkpoints since its last keyframe, as a paused
// one does: `rollback --to SEQ` of a finished harness reaches them. (Writing the finishing
// checkpoint as a keyframe would save a kilobyte or so of a finished chain and release them.)
func TestAFinishedHarnessKeepsItsRecentCheckpoints(t *testing.T) {
	e, _ := bridge.Load()
	s := openStore(t, t.TempDir(), e, bridge.ChainPolicy{})
	r := rand.New(rand.NewPCG(5, 12))
	st := stategen.Reference(r, 20_000)
	var states []*statefmt.HarnessState
	for _, status := range []statefmt.Status{statefmt.StatusRunning, statefmt.StatusRunning, statefmt.StatusRunning,
		statefmt.StatusCompleted, statefmt.StatusRunning, statefmt.StatusFailed} {
		step(r, st)
		st.Status = status
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
		states = append(states, clone(t, st))
	}
	first, err := s.FirstSeq(st.HarnessID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Backend() == bridge.BackendFallback {
		return // keyframes only: each releases the records before it
	}
	if first != 1 {
		t.Fatalf("a finished harness holds its chain from record %d, want 1", first)
	}
	for seq, want := range states {
		got, err := s.RestoreAt(st.HarnessID, uint64(seq+1))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("checkpoint %d of the finished harness: %v", seq+1, err)
		}
	}
}

func TestStoppedHarnessStartsANewCompressionStream(t *testing.T) {
	e, _ := bridge.Load()
	dir := t.TempDir()
	s := openStore(t, dir, e, bridge.ChainPolicy{})
	r := rand.New(rand.NewPCG(5, 11))
	st := stategen.Reference(r, 20_000)
	st.Status = statefmt.StatusRunning
	persist := func(status statefmt.Status) {
		t.Helper()
		step(r, st)
		st.Status = status
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
	}
	for _, status := range []statefmt.Status{statefmt.StatusRunning, statefmt.StatusRunning, statefmt.StatusRunning,
		statefmt.StatusPaused, statefmt.StatusRunning, statefmt.StatusRunning, statefmt.StatusCompleted} {
		persist(status)
	}
	recs, err := s.Inspect(st.HarnessID)
	if err != nil {
		t.Fatal(err)
	}
	var got []statefmt.Compression
	for _, rec := range recs {
		got = append(got, rec.Compression)
	}
	// keyframe; a stream of three deltas, the third the pause; a new stream of three. (The Go
	// fallback writes keyframes only: no deltas, no streams; its chain holds the last one.)
	want := []statefmt.Compression{statefmt.CompressionZstd, statefmt.CompressionZstdStreamStart, statefmt.CompressionZstdStream,
		statefmt.CompressionZstdStream, statefmt.CompressionZstdStreamStart, statefmt.CompressionZstdStream, statefmt.CompressionZstdStream}
	if e.Backend() == bridge.BackendFallback {
		want = []statefmt.Compression{statefmt.CompressionZstd}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("compressions %v, want %v", got, want)
	}
	for reopen := range 2 {
		if reopen == 1 {
			s.Close()
			s = openStore(t, dir, e, bridge.ChainPolicy{})
		}
		if back, err := s.Restore(st.HarnessID); err != nil || !reflect.DeepEqual(back, clone(t, st)) {
			t.Fatalf("restore (reopened: %d): %v", reopen, err)
		}
		if problems, err := s.Verify(st.HarnessID); err != nil || len(problems) != 0 {
			t.Fatalf("verify (reopened: %d): %v %v", reopen, problems, err)
		}
	}
	s.Close()
}

// ChainBytes adds up a harness's stored records without decompressing them: what Inspect
// reports record by record, also after a keyframe released the records before it.
func TestChainBytesIsWhatTheRecordsTake(t *testing.T) {
	e, _ := bridge.Load()
	s := openStore(t, t.TempDir(), e, bridge.ChainPolicy{MaxReplay: 4})
	defer s.Close()
	r := rand.New(rand.NewPCG(8, 8))
	st := stategen.Reference(r, 50_000)
	for i := range 11 {
		step(r, st)
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Inspect(st.HarnessID)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, rec := range recs {
			want += rec.StoredBytes
		}
		if got, err := s.ChainBytes(st.HarnessID); err != nil || got != want || got == 0 {
			t.Fatalf("after checkpoint %d: ChainBytes %d, %v; the records take %d", i+1, got, err, want)
		}
	}
	if n, err := s.ChainBytes("nobody"); err != nil || n != 0 {
		t.Fatalf("a harness the store does not hold: %d, %v", n, err)
	}
	if _, err := s.ChainBytes("../x"); err == nil {
		t.Fatal("an invalid id was accepted")
	}
}

// Reading many short chains one after another (a report, the metrics, verify over a store of
// thousands of harnesses) reuses the decoder of the chains' compression stream: a decoder made
// for each read allocated and cleared its history, the stream's 1 MiB window and more, which
// cost more than the replay of a small harness.
func TestRestoresOfManyHarnessesShareTheirStreamDecoders(t *testing.T) {
	s := openStore(t, t.TempDir(), nil, bridge.ChainPolicy{})
	defer s.Close()
	r := rand.New(rand.NewPCG(7, 7))
	const n = 20
	var ids []string
	for i := range n {
		st := stategen.Reference(r, 0)
		st.HarnessID = fmt.Sprintf("h%02d", i)
		for range 3 { // a keyframe, then deltas in the stream
			step(r, st)
			if _, err := s.Persist(st); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, st.HarnessID)
	}
	restoreAll := func() uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, id := range ids {
			s.Release(id)
			if _, err := s.Restore(id); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	restoreAll() // the first read makes the decoder
	if per := restoreAll(); per > 256<<10 {
		t.Fatalf("a restore of a small harness allocated %d bytes (a stream decoder's history is about 1.3 MB)", per)
	}
}

// A harness that stops gives its delta compressor to the next one that starts: short harnesses
// one after another (a long plan's sub-agents, a daemon's queue) do not each make a zstd
// encoder, whose window and tables cost more than a short harness's checkpoints.
func TestShortHarnessesOneAfterAnotherShareTheirStreamEncoders(t *testing.T) {
	s := openStore(t, t.TempDir(), nil, bridge.ChainPolicy{})
	defer s.Close()
	r := rand.New(rand.NewPCG(8, 8))
	run := func(id string) { shortHarness(t, s, r, id) }
	run("first") // makes the encoder
	const n = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		run(fmt.Sprintf("h%02d", i))
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 512<<10 {
		t.Fatalf("a short harness allocated %d bytes (a stream encoder's window and tables are megabytes)", per)
	}
	for i := range n { // and each reads back
		s.Release(fmt.Sprintf("h%02d", i))
		if st, err := s.Restore(fmt.Sprintf("h%02d", i)); err != nil || st.Status != statefmt.StatusCompleted {
			t.Fatalf("h%02d reads back: %v", i, err)
		}
	}
}

// A store that goes a while without a checkpoint gives back the compressors it keeps idle for
// the next harness (a keyframe encoder 2 to 18 MB, by the size of the states it compressed, a
// stream encoder about 4): a daemon that
// ran a burst and waits all night for the next does not hold them. Checkpoints closer together
// keep them, and the next harness after the release makes them again.
func TestAnIdleStoreGivesBackItsCompressors(t *testing.T) {
	s, err := store.OpenStore(t.TempDir(), store.StoreOptions{IdleRelease: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(9, 9))
	run := func(id string) { shortHarness(t, s, r, id) }
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	run("a")
	// (The Go fallback engine writes no delta stream: it has keyframe encoders only.)
	k0, st0 := s.IdleCompressors()
	if k0 != 1 || st0 > 1 {
		t.Fatalf("after a harness: %d idle keyframe encoders, %d stream encoders; want 1 and at most 1", k0, st0)
	}
	held := heap()
	for i := range 5 { // checkpoints closer together than the idle time keep them
		time.Sleep(100 * time.Millisecond)
		run(fmt.Sprintf("b%d", i))
		if k, st := s.IdleCompressors(); k != k0 || st != st0 {
			t.Fatalf("checkpoints 100 ms apart: %d idle keyframe encoders, %d stream encoders; want %d and %d", k, st, k0, st0)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if k, st := s.IdleCompressors(); k == 0 && st == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the store kept its idle compressors")
		}
	}
	// At least a keyframe encoder's tables (1.2 MB) go back: the Go fallback has no stream
	// encoder to give back.
	if released := heap(); released+1<<20 > held {
		t.Fatalf("the Go heap held %d bytes with the compressors, %d without: want 1 MB or more given back", held, released)
	}
	run("c")
	for _, id := range []string{"a", "b4", "c"} {
		s.Release(id)
		if st, err := s.Restore(id); err != nil || st.Status != statefmt.StatusCompleted {
			t.Fatalf("%s reads back: %v", id, err)
		}
	}
}

// shortHarness persists a harness of three checkpoints (a keyframe, then deltas in its stream)
// that then completes, which gives its stream encoder back to the store.
func shortHarness(t *testing.T, s *store.Store, r *rand.Rand, id string) {
	t.Helper()
	st := stategen.Reference(r, 0)
	st.HarnessID, st.Status = id, statefmt.StatusRunning
	for range 3 { // a keyframe, then deltas in the stream
		step(r, st)
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
	}
	st.Status = statefmt.StatusCompleted
	if _, err := s.Persist(st); err != nil {
		t.Fatal(err)
	}
}
