package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"

	"github.com/cockroachdb/pebble/v2"
	"github.com/klauspost/compress/zstd"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/statefmt"
)

// What a replica of a store needs: each harness's records and events exactly as stored, read
// from a point in the log on, and a way to rebuild and check a head state from such records
// somewhere the store is not.

// StoredRecords calls f with each record of the harness stored above sequence `after`, oldest
// first, as stored (the record envelope: payload compressed, hashes in the clear), from one
// consistent view of the store. Records before the newest keyframe are released when it is
// written, so the first record f sees may be further on than after+1: it is a keyframe then,
// or the record just before it whose checkpoint its owner had not announced yet when the
// keyframe was written (StoredRecord returns that one too, until the next checkpoint).
// f owns the bytes it is given.
func (s *Store) StoredRecords(id string, after uint64, f func(seq uint64, envelope []byte) error) error {
	if err := ValidID(id); err != nil {
		return err
	}
	s.settle(id)
	// The released record is looked up once the view is taken: PersistWith keeps it before
	// it applies the keyframe that releases it, so a view that holds the keyframe finds it.
	// A view from before the keyframe still holds the record itself, and f sees it once.
	kept := func() (uint64, []byte, bool) {
		r, ok := s.released.Load(id)
		if !ok || r.(releasedRecord).seq <= after {
			return 0, nil, false
		}
		return r.(releasedRecord).seq, r.(releasedRecord).env, true
	}
	return s.scanStored(id, chainKey(id, after+1), chainKey(id, 1<<64-1), "its records", kept, f)
}

// StoredEvents calls f with each event of the harness numbered above `after`, in order, as
// stored (the event's JSON), up to the first one that is not durable yet (see Events). f owns
// the bytes it is given.
func (s *Store) StoredEvents(id string, after uint64, f func(n uint64, data []byte) error) error {
	if err := ValidID(id); err != nil {
		return err
	}
	return s.scanStored(id, eventKey(id, after+1), s.eventsBound(id), "its event log", nil, f)
}

// kept, when not nil, is called once the view is taken and may give one more entry, which f
// sees in its place by number unless the view holds that number itself.
func (s *Store) scanStored(id string, lo, hi []byte, what string, kept func() (uint64, []byte, bool), f func(n uint64, v []byte) error) error {
	// An iterator reads one consistent view of the store: no snapshot is needed.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	var kn uint64
	var kv []byte
	var has bool
	if kept != nil {
		kn, kv, has = kept()
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		n := binary.BigEndian.Uint64(k[len(k)-8:])
		if has && kn <= n {
			has = false
			if kn < n {
				if err := f(kn, bytes.Clone(kv)); err != nil {
					return err
				}
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return damaged(id, fmt.Sprintf("%s at %d", what, n), err)
		}
		if err := f(n, bytes.Clone(v)); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return damaged(id, what, err)
	}
	if has {
		return f(kn, bytes.Clone(kv))
	}
	return nil
}

// Rebuild replays the records of a harness as stored (StoredRecords' envelopes, from the
// index entry's keyframe to its head, in order) with engine (nil: bridge.Load), checking every hash and link as
// an import does, and returns the head state, which must agree with the index entry. It
// reads and writes no store: a replica elsewhere uses it to show a harness's state and to
// prove that what it holds is whole.
func Rebuild(engine bridge.Engine, index IndexEntry, records [][]byte) (*statefmt.HarnessState, error) {
	zdec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(statefmt.MaxRawLen))
	if err != nil {
		return nil, err
	}
	defer zdec.Close()
	if engine == nil {
		engine, _ = bridge.Load()
	}
	s := &Store{engine: engine, zdec: zdec}
	m := &member{id: index.ID, index: index, records: records}
	if err := s.verifyMember(m); err != nil {
		return nil, fmt.Errorf("harness %s: %w", index.ID, err)
	}
	return m.state, nil
}

// StoredRecord returns one record of the harness as stored (its envelope), or an error
// wrapping ErrNotFound when the store does not hold it (never written, or released by a
// newer keyframe).
func (s *Store) StoredRecord(id string, seq uint64) ([]byte, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	v, closer, err := s.db.Get(chainKey(id, seq))
	if errors.Is(err, pebble.ErrNotFound) {
		if r, ok := s.released.Load(id); ok && r.(releasedRecord).seq == seq {
			return bytes.Clone(r.(releasedRecord).env), nil
		}
		return nil, fmt.Errorf("%w: harness %s record %d", ErrNotFound, id, seq)
	}
	if err != nil {
		return nil, damaged(id, fmt.Sprintf("record %d", seq), err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}
