package store_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// Repair recovers or quarantines every damaged harness of a real store (a flipped bit in the
// newest write-ahead log, or in a table at three places): afterwards verify finds nothing,
// the harnesses that were whole are unchanged, a recovered one restores with a warning event
// that says what was lost, a quarantined one is gone from the store and its readable keys are
// in its quarantine file; a second repair has nothing to do.
func TestRepairRecoversOrQuarantinesDamagedHarnesses(t *testing.T) {
	dir := t.TempDir()
	oracle := realStore(t, dir)
	ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
	cases := map[string]func(t *testing.T, d string){
		"log": func(t *testing.T, d string) { flipAt(t, newest(t, d, "*.log"), 0.10, 3) },
	}
	for _, frac := range []float64{0.05, 0.3, 0.6} {
		cases[fmt.Sprint("table ", frac)] = func(t *testing.T, d string) { flipAt(t, filepath.Join(d, "db", filepath.Base(ssts[0])), frac, 5) }
	}
	// A record whose own checksum fails (the table block around it is whole): the checkpoint
	// before it still restores, when the chain holds one (the Go fallback writes keyframes only,
	// and a chain keeps nothing before its newest keyframe: then the harness is quarantined).
	headIsKeyframe := false
	cases["record"] = func(t *testing.T, d string) {
		db, err := pebble.Open(filepath.Join(d, "db"), &pebble.Options{Logger: silent{}})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var idx store.IndexEntry
		v, closer, err := db.Get([]byte("i/h2"))
		if err != nil {
			t.Fatal(err)
		}
		err = json.Unmarshal(v, &idx)
		closer.Close()
		if err != nil {
			t.Fatal(err)
		}
		headIsKeyframe = idx.HeadSeq == idx.KeyframeSeq
		key := binary.BigEndian.AppendUint64([]byte("c/h2/"), idx.HeadSeq)
		v, closer, err = db.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		rec := bytes.Clone(v)
		closer.Close()
		rec[len(rec)/2] ^= 0x10
		if err := db.Set(key, rec, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			copyDir(t, dir, d)
			damage(t, d)
			before := check(d, oracle)
			expectNoSilentLoss(t, before)
			if before.refused != nil {
				// Pebble refused a log it cannot read past (on some backends' record sizes the
				// flip lands in a chunk it checks): a store that does not open is not repaired.
				t.Logf("the store refuses to open, naming why; nothing to repair: %v", before.refused)
				return
			}
			if len(before.reported) == 0 {
				t.Fatalf("the damage was not found: %+v", before)
			}
			s, err := store.OpenStore(d, store.StoreOptions{Policy: bridgePolicy(), ErrorLog: discard{}})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := s.Repair()
			if err != nil {
				s.Close()
				t.Fatal(err)
			}
			if len(rep.Remaining) != 0 {
				s.Close()
				t.Fatalf("verify after the repair: %+v", rep.Remaining)
			}
			got := map[string]store.RepairOutcome{}
			for _, o := range rep.Harnesses {
				got[o.ID] = o
			}
			for _, id := range before.reported {
				o, ok := got[id]
				if !ok {
					t.Fatalf("reported %s was not repaired: %+v", id, rep)
				}
				switch o.Action {
				case "recovered":
					if _, err := s.Restore(id); err != nil {
						t.Fatalf("recovered %s does not restore: %v", id, err)
					}
					if o.Quarantine != "" {
						var last event.Event
						if err := s.Events(id, 0, func(e event.Event) bool { last = e; return true }); err != nil || !strings.Contains(last.Message, "repaired: recovered to checkpoint") {
							t.Fatalf("recovered %s: last event %+v (%v)", id, last, err)
						}
					}
				case "quarantined":
					if _, err := s.Restore(id); err == nil {
						t.Fatalf("quarantined %s is still in the store", id)
					}
				default:
					t.Fatalf("%s: action %q", id, o.Action)
				}
				if o.Quarantine != "" {
					checkQuarantine(t, o.Quarantine, id)
				}
			}
			for _, id := range before.exact {
				st, err := s.Restore(id)
				if err != nil || !reflect.DeepEqual(st, oracle[id].state) {
					t.Fatalf("%s was whole and changed in the repair: %v", id, err)
				}
			}
			switch {
			case name != "record":
			case headIsKeyframe && got["h2"].Action != "quarantined":
				t.Fatalf("h2, whose only record is damaged, was not quarantined: %+v", got["h2"])
			case !headIsKeyframe && (got["h2"].Action != "recovered" || got["h2"].Seq != got["h2"].Acknowledged-1):
				t.Fatalf("h2, whose newest record is damaged, was not recovered to the one before: %+v", got["h2"])
			}
			t.Logf("repaired: %+v", rep.Harnesses)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Reopened: no damage left, and nothing more to repair.
			s, err = store.OpenStore(d, store.StoreOptions{Policy: bridgePolicy(), ErrorLog: discard{}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			again, err := s.Repair()
			if err != nil || len(again.Harnesses) != 0 || len(again.Remaining) != 0 {
				t.Fatalf("a second repair: %+v %v", again, err)
			}
			l, _ := s.List()
			for _, e := range l {
				if e.Damaged != "" {
					t.Fatalf("still damaged after reopening: %+v", e)
				}
			}
		})
	}
}

// checkQuarantine reads a quarantine file: a header naming the harness, then keys of it only.
func checkQuarantine(t *testing.T, path, id string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var head struct{ Harness, Damage string }
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &head) != nil || head.Harness != id || head.Damage == "" {
		t.Fatalf("%s: bad header %q", path, sc.Text())
	}
	for sc.Scan() {
		var kv struct{ Key, Value []byte }
		if err := json.Unmarshal(sc.Bytes(), &kv); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		k := string(kv.Key)
		if !slices.ContainsFunc([]string{"i/", "t/", "c/", "e/", "n/"}, func(p string) bool {
			return k == p+id || strings.HasPrefix(k, p+id+"/")
		}) {
			t.Fatalf("%s holds a key of another harness: %q", path, k)
		}
	}
}

// A harness whose head a newer harness-edge wrote (a binary format this build does not read)
// is not damage: Repair refuses before it changes anything, and the harness is still there.
func TestRepairLeavesAHarnessANewerBuildWrote(t *testing.T) {
	dir := t.TempDir()
	s, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	st := stategen.Reference(r, 4_000)
	if _, err := s.Persist(st); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The head as a newer build would write it: a keyframe of a state in the next format.
	payload, err := statefmt.EncodeBinary(st)
	if err != nil {
		t.Fatal(err)
	}
	payload[3] = statefmt.BinaryFormatVersion + 1
	info := bridge.RecordInfo{Kind: bridge.KindKeyframe, Seq: 1, BaseSeq: 1, StateHash: xxhash.Sum64(payload),
		RawLen: uint64(len(payload)), StateLen: uint64(len(payload))}
	info.ChainHash = bridge.Link(0, info, payload)
	rec := statefmt.Record{Kind: statefmt.KindKeyframe, Seq: 1, BaseSeq: 1, StateHash: info.StateHash, ChainHash: info.ChainHash,
		RawLen: info.RawLen, StateFormat: statefmt.BinaryFormatVersion + 1, Compression: statefmt.CompressionNone, Payload: payload}
	db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{Logger: silent{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(binary.BigEndian.AppendUint64([]byte("c/"+st.HarnessID+"/"), 1), statefmt.EncodeRecord(nil, &rec), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Repair()
	if err == nil || !strings.Contains(err.Error(), "written by a newer harness-edge") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("repair: %v, want a refusal naming the newer build", err)
	}
	if _, err := s.Index(st.HarnessID); err != nil {
		t.Fatalf("the harness is gone after the refused repair: %v", err)
	}
	if recs, err := s.Inspect(st.HarnessID); err != nil || len(recs) != 1 {
		t.Fatalf("its chain after the refused repair: %d records, %v", len(recs), err)
	}
}
