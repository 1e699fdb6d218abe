package store_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/reexec"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// acked is what the store acknowledged for one harness: its last state and how many events.
type acked struct {
	state  *statefmt.HarnessState
	events int
}

// persistSteps persists n checkpoints of the harness st, each with two events, and records them.
func persistSteps(t *testing.T, s *store.Store, r *rand.Rand, st *statefmt.HarnessState, n int, oracle map[string]*acked) {
	t.Helper()
	a := oracle[st.HarnessID]
	if a == nil {
		a = &acked{}
		oracle[st.HarnessID] = a
	}
	for i := range n {
		step(r, st)
		x := store.Extras{
			Events:     []event.Event{{Type: event.Warning, HarnessID: st.HarnessID, Time: st.UpdatedAt, Message: fmt.Sprintf("step %d", i)}},
			Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: st.HarnessID, Time: st.UpdatedAt},
		}
		if a.events == 0 {
			x.Task = []byte(`{"id":"nightly-refactor","agent":"MARS"}`)
		}
		if _, err := s.PersistWith(st, x); err != nil {
			t.Fatal(err)
		}
		a.events += 2
	}
	a.state = clone(t, st)
}

// flushDB flushes the store's memtable into tables, straight in Pebble (the store is closed).
func flushDB(t *testing.T, dir string) {
	t.Helper()
	db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{Logger: silent{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// realStore builds a store as the runtime leaves it: harnesses whose older checkpoints are in
// tables and newer ones in the write-ahead log, one harness only in the log, each with its
// events and task; closed. It returns what was acknowledged.
func realStore(t *testing.T, dir string) map[string]*acked {
	t.Helper()
	oracle := map[string]*acked{}
	r := rand.New(rand.NewPCG(7, 7))
	var states []*statefmt.HarnessState
	s := openStore(t, dir, nil, bridgePolicy())
	for i := range 4 {
		st := stategen.Reference(r, 3_000)
		st.HarnessID = fmt.Sprintf("h%d", i)
		persistSteps(t, s, r, st, 6, oracle)
		states = append(states, st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flushDB(t, dir)
	s = openStore(t, dir, nil, bridgePolicy())
	for _, st := range states[:2] {
		persistSteps(t, s, r, st, 4, oracle)
	}
	st := stategen.Reference(r, 3_000)
	st.HarnessID = "walonly"
	persistSteps(t, s, r, st, 5, oracle)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return oracle
}

// outcome is what a damaged store made of the acknowledged harnesses.
type outcome struct {
	refused  error    // the store refused to open (naming why)
	exact    []string // restored byte for byte, with every event
	reported []string // reported damaged, by name
	silent   []string // neither: lost or changed without a word
	panicked any
}

// check opens the store in dir and compares every acknowledged harness with the oracle.
func check(dir string, oracle map[string]*acked) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			o.panicked = p
		}
	}()
	s, err := store.OpenStore(dir, store.StoreOptions{Policy: bridgePolicy(), ErrorLog: discard{}})
	if err != nil {
		o.refused = err
		return o
	}
	defer s.Close()
	problems, err := s.Verify("")
	if err != nil {
		o.refused = err
		return o
	}
	flagged := map[string]bool{}
	for _, p := range problems {
		flagged[p.ID] = true
	}
	list, lerr := s.List()
	for _, e := range list {
		if e.Damaged != "" {
			flagged[e.ID] = true
		}
	}
	ids := make([]string, 0, len(oracle))
	for id := range oracle {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := oracle[id]
		named := func(err error) bool { return err != nil && strings.Contains(err.Error(), id) }
		got, err := s.Restore(id)
		if err != nil {
			if named(err) && flagged[id] {
				o.reported = append(o.reported, id)
			} else {
				o.silent = append(o.silent, fmt.Sprintf("%s: restore: %v (verify flagged it: %v, list: %v)", id, err, flagged[id], lerr))
			}
			continue
		}
		n := 0
		err = s.Events(id, 0, func(event.Event) bool { n++; return true })
		switch {
		case !reflect.DeepEqual(got, a.state):
			o.silent = append(o.silent, id+": restored a different state")
		case err != nil && (!named(err) || !flagged[id]):
			o.silent = append(o.silent, fmt.Sprintf("%s: events: %v (verify flagged it: %v)", id, err, flagged[id]))
		case err != nil:
			o.reported = append(o.reported, id)
		case n != a.events:
			o.silent = append(o.silent, fmt.Sprintf("%s: %d events, %d acknowledged", id, n, a.events))
		case flagged[id]:
			o.reported = append(o.reported, id) // whole, but something of it is damaged
		default:
			o.exact = append(o.exact, id)
		}
	}
	return o
}

func bridgePolicy() bridge.ChainPolicy { return bridge.ChainPolicy{MaxReplay: 3} }

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// files lists the store's files (relative paths), sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func newest(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "db", pattern))
	slices.Sort(m)
	if len(m) == 0 {
		t.Fatalf("no %s in %s", pattern, dir)
	}
	return m[len(m)-1]
}

func flipAt(t *testing.T, path string, frac float64, bit byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := int(float64(len(b)) * frac)
	b[i] ^= 1 << bit
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// expectNoSilentLoss fails unless every acknowledged harness is restored exactly or reported.
func expectNoSilentLoss(t *testing.T, o outcome) {
	t.Helper()
	if o.panicked != nil {
		t.Fatalf("panic: %v", o.panicked)
	}
	if len(o.silent) > 0 {
		t.Fatalf("lost without a word: %s", strings.Join(o.silent, "; "))
	}
}

// A flipped bit early in the newest write-ahead log ends Pebble's recovery there: the
// checkpoints after it are gone. The store names each harness that lost acknowledged ones.
func TestFlippedBitInTheLogIsReported(t *testing.T) {
	dir := t.TempDir()
	oracle := realStore(t, dir)
	flipAt(t, newest(t, dir, "*.log"), 0.10, 3)
	o := check(dir, oracle)
	expectNoSilentLoss(t, o)
	if o.refused == nil && len(o.reported) == 0 {
		t.Fatalf("nothing reported after a flipped bit in the log: %+v", o)
	}
	t.Logf("refused: %v; exact: %v; reported: %v", o.refused, o.exact, o.reported)
	// The report survives the next open too: the lost harness is still named.
	if o.refused == nil {
		o2 := check(dir, oracle)
		expectNoSilentLoss(t, o2)
		if !slices.Equal(o2.reported, o.reported) {
			t.Fatalf("second open reports %v, first %v", o2.reported, o.reported)
		}
	}
}

// A store whose empty manifest marker was dropped (backup tools skip empty files) is refused,
// naming the file, instead of being opened as a new empty database.
func TestMissingManifestMarkerIsRefused(t *testing.T) {
	dir := t.TempDir()
	oracle := realStore(t, dir)
	m, _ := filepath.Glob(filepath.Join(dir, "db", "marker.manifest.*"))
	if len(m) != 1 {
		t.Fatalf("markers: %v", m)
	}
	if err := os.Remove(m[0]); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	o := check(dir, oracle)
	if o.refused == nil || !strings.Contains(o.refused.Error(), "marker.manifest") {
		t.Fatalf("opened without the manifest marker: %+v", o)
	}
	if after := files(t, dir); !slices.Equal(before, after) {
		t.Fatalf("files changed: %v -> %v", before, after)
	}
}

// A store whose creation was cut short (the process killed after Pebble wrote its first
// MANIFEST, before the marker naming it) holds nothing: it opens as a new store, instead of
// being refused for a marker that was never there. With a heads file that names harnesses the
// same files are refused: that store held something.
func TestAStoreWhoseCreationWasCutShortOpens(t *testing.T) {
	// What a creation killed before the marker leaves: the lock and the first manifest, whose
	// one edit names the comparer.
	manifest := []byte("\xa1\x17wJ \x00\x01\x01\x1aleveldb.BytewiseComparator\x03\x02\x04\x00")
	cutShort := func(t *testing.T, dir string) {
		t.Helper()
		db := filepath.Join(dir, "db")
		if err := os.MkdirAll(db, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"LOCK": nil, "MANIFEST-000001": manifest} {
			if err := os.WriteFile(filepath.Join(db, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	cutShort(t, dir)
	r := rand.New(rand.NewPCG(3, 3))
	oracle := map[string]*acked{}
	s, err := store.OpenStore(dir, store.StoreOptions{Policy: bridgePolicy(), ErrorLog: discard{}})
	if err != nil {
		t.Fatalf("a store whose creation was cut short: %v", err)
	}
	st := stategen.Reference(r, 1_000)
	st.HarnessID = "h"
	persistSteps(t, s, r, st, 3, oracle)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	expectNoSilentLoss(t, check(dir, oracle))

	// The heads file says harnesses were acknowledged: the database that held them is gone.
	held := t.TempDir()
	realStore(t, held)
	if err := os.RemoveAll(filepath.Join(held, "db")); err != nil {
		t.Fatal(err)
	}
	cutShort(t, held)
	before := files(t, held)
	if _, err := store.OpenStore(held, store.StoreOptions{Policy: bridgePolicy(), ErrorLog: discard{}}); err == nil || !strings.Contains(err.Error(), "marker.manifest") {
		t.Fatalf("a store whose heads name harnesses opened with only a first manifest: %v", err)
	}
	if after := files(t, held); !slices.Equal(before, after) {
		t.Fatalf("files changed: %v -> %v", before, after)
	}
}

// A damaged table block is an error naming the harness, never a panic; the other harnesses
// stay readable, and verify reads the event log and the tasks too.
func TestDamagedTableBlockIsNamed(t *testing.T) {
	dir := t.TempDir()
	oracle := realStore(t, dir)
	ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no tables")
	}
	for _, frac := range []float64{0.05, 0.3, 0.6} {
		t.Run(fmt.Sprint(frac), func(t *testing.T) {
			d := t.TempDir()
			copyDir(t, dir, d)
			flipAt(t, filepath.Join(d, "db", filepath.Base(ssts[0])), frac, 5)
			o := check(d, oracle)
			expectNoSilentLoss(t, o)
			if o.refused != nil || len(o.reported) == 0 || len(o.exact) == 0 {
				t.Fatalf("want some harnesses reported and the rest readable: %+v", o)
			}
			t.Logf("exact: %v; reported: %v", o.exact, o.reported)
		})
	}
}

// TestCorruptionFuzz flips a random bit of, or truncates, a random file of a real store, 200
// times: no panic, and every acknowledged harness is restored exactly or reported by name (or
// the store refuses to open, saying why).
func TestCorruptionFuzz(t *testing.T) {
	trials := 200
	if testing.Short() {
		trials = 40
	}
	dir := t.TempDir()
	oracle := realStore(t, dir)
	names := files(t, dir)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	seed := r.Uint64()
	r = rand.New(rand.NewPCG(seed, 11))
	var refused, exact, reported, silent, recovered, quarantined, left int
	for trial := range trials {
		name := names[r.IntN(len(names))]
		d := filepath.Join(t.TempDir(), "store")
		copyDir(t, dir, d)
		path := filepath.Join(d, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		what := ""
		switch {
		case len(b) > 0 && r.IntN(2) == 0:
			i := r.IntN(len(b))
			bit := r.IntN(8)
			b[i] ^= 1 << bit
			what = fmt.Sprintf("bit %d of byte %d of %d flipped in %s", bit, i, len(b), name)
		default:
			n := 0
			if len(b) > 0 {
				n = r.IntN(len(b))
			}
			what = fmt.Sprintf("%s truncated from %d to %d bytes", name, len(b), n)
			b = b[:n]
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		o := check(d, oracle)
		if o.panicked != nil || len(o.silent) > 0 {
			silent += len(o.silent)
			t.Errorf("trial %d (seed %d): %s: panic %v, lost without a word: %v", trial, seed, what, o.panicked, o.silent)
			continue
		}
		if o.refused != nil {
			refused++
			continue
		}
		exact += len(o.exact)
		reported += len(o.reported)
		if len(o.reported) == 0 {
			continue
		}
		// Repair what was reported: verify then finds nothing, and the harnesses that were
		// whole are unchanged.
		rec, quar, err := repairAndCheck(d, oracle, o.exact)
		if errors.Is(err, errLeft) {
			left++
		} else if err != nil {
			t.Errorf("trial %d (seed %d): %s: repair: %v", trial, seed, what, err)
		}
		recovered += rec
		quarantined += quar
	}
	t.Logf("%d trials over %d files (seed %d): %d refused to open, %d harnesses restored exactly, %d reported damaged, %d lost silently; the repair recovered %d and quarantined %d, and left a damaged table in %d trials",
		trials, len(names), seed, refused, exact, reported, silent, recovered, quarantined, left)
}

// errLeft says the repair left a damaged table it could not cut.
var errLeft = errors.New("a damaged table is left")

// repairAndCheck repairs the store in dir and checks it: nothing left for verify, the exact
// harnesses unchanged, nothing more to repair on the next open. It returns how many harnesses
// were recovered and quarantined.
func repairAndCheck(dir string, oracle map[string]*acked, exact []string) (recovered, quarantined int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	s, err := store.OpenStore(dir, store.StoreOptions{Policy: bridgePolicy(), ErrorLog: discard{}})
	if err != nil {
		return 0, 0, err
	}
	rep, err := s.Repair()
	if err != nil {
		s.Close()
		return 0, 0, err
	}
	for _, h := range rep.Harnesses {
		if h.Action == "recovered" {
			recovered++
		} else {
			quarantined++
		}
	}
	for _, p := range rep.Remaining {
		// A table whose index block is damaged cannot be cut; it stays reported.
		if !strings.Contains(p.Reason, "a table block") {
			s.Close()
			return recovered, quarantined, fmt.Errorf("verify after the repair: %+v", rep.Remaining)
		}
	}
	if len(rep.Remaining) > 0 {
		s.Close()
		return recovered, quarantined, errLeft
	}
	for _, id := range exact {
		if st, err := s.Restore(id); err != nil || !reflect.DeepEqual(st, oracle[id].state) {
			s.Close()
			return recovered, quarantined, fmt.Errorf("%s was whole and changed in the repair: %v", id, err)
		}
	}
	if err := s.Close(); err != nil {
		return recovered, quarantined, err
	}
	s, err = store.OpenStore(dir, store.StoreOptions{Policy: bridgePolicy(), ErrorLog: discard{}})
	if err != nil {
		return recovered, quarantined, fmt.Errorf("reopen after the repair: %w", err)
	}
	defer s.Close()
	if again, err := s.Repair(); err != nil || len(again.Harnesses) != 0 || len(again.Remaining) != 0 {
		return recovered, quarantined, fmt.Errorf("a second repair: %+v %v", again, err)
	}
	return recovered, quarantined, nil
}

// headsChild checkpoints six times with the heads file rewritten after every checkpoint, says
// "done" and waits to be killed: a store that was never closed.
func headsChild(dir string) {
	store.SetHeadsEvery(0)
	s, err := store.OpenStore(dir, store.StoreOptions{Policy: bridgePolicy()})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	st := crashStart()
	for n := 1; n <= 6; n++ {
		crashStep(st, n)
		if _, err := s.Persist(st); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		time.Sleep(20 * time.Millisecond) // the background write of the heads file
	}
	fmt.Println("done")
	select {}
}

// A process killed without closing the store, then a flipped bit in its write-ahead log: the
// heads file written in the background names the harness that lost acknowledged checkpoints.
func TestFlippedLogBitAfterAKillIsReported(t *testing.T) {
	dir := t.TempDir()
	cmd := reexec.Command("HARNESS_EDGE_HEADS_CHILD", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "done" {
		if strings.HasPrefix(sc.Text(), "error") {
			t.Fatalf("child: %s", sc.Text())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	var oracle crashOracle
	want := oracle.at(t, 6)
	flipAt(t, newest(t, dir, "*.log"), 0.10, 3)
	s, err := store.OpenStore(dir, store.StoreOptions{Policy: bridgePolicy(), ErrorLog: discard{}})
	if err != nil {
		t.Logf("refused: %v", err) // not silent
		return
	}
	defer s.Close()
	got, err := s.Restore(want.HarnessID)
	switch {
	case err == nil && reflect.DeepEqual(got, want):
		t.Fatal("the flipped bit lost nothing: the test tested little")
	case err == nil:
		t.Fatalf("restored checkpoint %d without a word, 6 were acknowledged", got.CheckpointCount)
	case !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), want.HarnessID):
		t.Fatalf("restore: %v", err)
	}
	t.Logf("restore: %v", err)
}
