package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/store"

	"github.com/cockroachdb/pebble/v2"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
)

// damage rewrites the stored record seq of harness id with f, straight in Pebble.
func damage(t *testing.T, dir, id string, seq uint64, f func([]byte) []byte) {
	t.Helper()
	db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{Logger: silent{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := binary.BigEndian.AppendUint64([]byte("c/"+id+"/"), seq)
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatalf("record %d: %v", seq, err)
	}
	nv := f(append([]byte(nil), v...))
	closer.Close()
	if err := db.Set(key, nv, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func TestStoreCorruptionIsReportedAndLastGoodRestores(t *testing.T) {
	engines, _ := bridge.Available()
	for _, e := range engines {
		for _, c := range []struct {
			name string
			f    func([]byte) []byte
		}{
			{"flipped bit", func(v []byte) []byte { v[len(v)/2] ^= 0x08; return v }},
			{"truncated", func(v []byte) []byte { return v[:len(v)-7] }},
		} {
			t.Run(string(e.Backend())+"/"+c.name, func(t *testing.T) {
				dir := t.TempDir()
				s := openStore(t, dir, e, bridge.ChainPolicy{MaxReplay: 100})
				r := rand.New(rand.NewPCG(4, 4))
				st := stategen.Reference(r, 5_000)
				var states []*statefmt.HarnessState
				for range 8 {
					step(r, st)
					if _, err := s.Persist(st); err != nil {
						t.Fatal(err)
					}
					states = append(states, clone(t, st))
				}
				s.Close()
				victim := uint64(5)
				if e.Backend() == bridge.BackendFallback {
					victim = 8 // keyframe-only: only the head is retained
				}
				damage(t, dir, st.HarnessID, victim, c.f)
				s = openStore(t, dir, e, bridge.ChainPolicy{MaxReplay: 100})
				defer s.Close()
				_, err := s.Restore(st.HarnessID)
				var ce *store.CorruptError
				if !errors.As(err, &ce) || ce.ID != st.HarnessID || ce.Seq != victim {
					t.Fatalf("restore after damage to record %d: %v", victim, err)
				}
				if !strings.Contains(err.Error(), st.HarnessID) || !strings.Contains(err.Error(), "record") {
					t.Fatalf("error does not name the harness and record: %v", err)
				}
				probs, err := s.Verify(st.HarnessID)
				if err != nil || len(probs) != 1 || probs[0].Seq != victim || probs[0].ID != st.HarnessID {
					t.Fatalf("verify: %+v, %v", probs, err)
				}
				if victim > 1 && ce.LastGood == victim-1 {
					got, err := s.RestoreAt(st.HarnessID, ce.LastGood)
					if err != nil || !reflect.DeepEqual(got, states[ce.LastGood-1]) {
						t.Fatalf("restore at the last good record %d: %v", ce.LastGood, err)
					}
				} else if e.Backend() != bridge.BackendFallback {
					t.Fatalf("last good record %d, want %d", ce.LastGood, victim-1)
				}
			})
		}
	}
}

type silent struct{}

func (silent) Infof(string, ...any)         {}
func (silent) Errorf(string, ...any)        {}
func (silent) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
