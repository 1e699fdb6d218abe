// Package memstore is an in-memory checkpoint store with the semantics of the Pebble store
// (package store) for the methods the harness core uses: persist and restore, the index and
// listing, the stored task, the event log, release and delete. It exists so that harness logic
// can be tested without a disk: nothing is written anywhere, nothing survives the process, and
// a test gets a fresh store with New.
//
// Each checkpoint is kept as the state's canonical binary encoding, so states are deep-copied on
// the way in (PersistWith encodes them) and on the way out (Restore decodes a new one each
// time), exactly as the Pebble store's are. Every checkpoint is a keyframe: there is no engine
// and no chain. Events are kept in the encoding of package event, numbered from 1 per harness,
// and decoded again by Events. Ids are checked with store.ValidID, and the errors wrap
// store.ErrInvalidID and store.ErrNotFound as the Pebble store's do.
//
// A Store is safe for concurrent use.
package memstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// Store is an in-memory checkpoint store. The zero value is not ready: use New.
type Store struct {
	mu        sync.Mutex
	harnesses map[string]*harness
}

// harness is everything the store holds for one id. A harness whose log was appended to before
// its first checkpoint has events but no state (and no index entry) yet.
type harness struct {
	state  []byte // the newest checkpoint's binary encoding (never written again); nil before the first
	index  store.IndexEntry
	task   []byte   // nil when no task was stored
	events [][]byte // events[i] is event number i+1, as event.Encode made it
}

// New returns an empty store.
func New() *Store { return &Store{harnesses: map[string]*harness{}} }

// IsAvailable reports true: the store needs no native engine.
func (s *Store) IsAvailable() bool { return true }

// PersistWith makes state the harness's newest checkpoint and writes x with it, all or nothing:
// an invalid id, an event that belongs to another harness or does not encode, or a state that
// does not encode is refused before anything changes.
func (s *Store) PersistWith(state *statefmt.HarnessState, x store.Extras) (store.Checkpoint, error) {
	id := state.HarnessID
	if err := store.ValidID(id); err != nil {
		return store.Checkpoint{}, err
	}
	events := slices.Clone(x.Events)
	if x.Checkpoint != nil {
		events = append(events, *x.Checkpoint)
	}
	raw, err := event.EncodeLog(id, events)
	if err != nil {
		return store.Checkpoint{}, err
	}
	start := time.Now()
	enc, err := statefmt.EncodeBinary(state) // a fresh copy: the caller may change state afterwards
	if err != nil {
		return store.Checkpoint{}, err
	}
	task := bytes.Clone(x.Task) // nil stays nil: keep the stored task

	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.harnesses[id]
	if h == nil {
		h = &harness{}
	}
	n := len(enc)
	cp := store.Checkpoint{Seq: h.index.HeadSeq + 1, Kind: statefmt.KindKeyframe, StateBytes: n, RawBytes: n, StoredBytes: n}
	if x.Checkpoint != nil {
		last := &events[len(events)-1]
		last.Seq, last.Kind, last.StoredBytes = cp.Seq, cp.Kind.String(), cp.StoredBytes
		if raw[len(raw)-1], err = event.Encode(*last); err != nil {
			return store.Checkpoint{}, err
		}
	}
	idx := h.index
	idx.ID, idx.AgentName, idx.TaskID, idx.Status = id, state.AgentName, state.TaskID, state.Status
	idx.ParentHarnessID, idx.CreatedAt, idx.UpdatedAt = state.ParentHarnessID, state.CreatedAt.Round(0), state.UpdatedAt.Round(0)
	idx.HeadSeq, idx.KeyframeSeq, idx.HeadStateBytes = cp.Seq, cp.Seq, uint64(n)
	idx.LastCheckpointAt = time.Now().UTC().Round(0)

	// Nothing can fail from here on.
	s.harnesses[id] = h
	h.state, h.index = enc, idx
	if task != nil {
		h.task = task
	}
	first := uint64(len(h.events)) + 1
	h.events = append(h.events, raw...)
	for i := range events {
		events[i].N = first + uint64(i)
	}
	cp.Events = events
	cp.Prepare = time.Since(start)
	return cp, nil
}

// Restore returns a new copy of the harness's newest state, or an error wrapping
// store.ErrNotFound.
func (s *Store) Restore(id string) (*statefmt.HarnessState, error) {
	if err := store.ValidID(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var enc []byte
	if h := s.harnesses[id]; h != nil {
		enc = h.state
	}
	s.mu.Unlock()
	if enc == nil {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	// enc is never written again, so the decoded strings may point into it; the rest of the
	// state is the decoder's own.
	return statefmt.DecodeBinaryOwned(enc)
}

// Task returns a copy of the task definition stored with the harness, or an error wrapping
// store.ErrNotFound.
func (s *Store) Task(id string) ([]byte, error) {
	if err := store.ValidID(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.harnesses[id]
	if h == nil || h.task == nil {
		return nil, fmt.Errorf("harness %s has no stored task: %w", id, store.ErrNotFound)
	}
	return bytes.Clone(h.task), nil
}

// Index returns the harness's index entry, or an error wrapping store.ErrNotFound.
func (s *Store) Index(id string) (store.IndexEntry, error) {
	if err := store.ValidID(id); err != nil {
		return store.IndexEntry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.harnesses[id]
	if h == nil || h.state == nil {
		return store.IndexEntry{}, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	return h.index, nil
}

// List returns every harness's index entry, ordered by id.
func (s *Store) List() ([]store.IndexEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.IndexEntry
	for _, h := range s.harnesses {
		if h.state != nil {
			out = append(out, h.index)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Release does nothing: the store keeps no cache apart from what it stores. It is here so that
// the store can stand in for the Pebble store.
func (s *Store) Release(id string) {}

// AppendEvents appends events to the harness's log and returns the number of the first. It
// refuses an empty list, and an event that belongs to another harness or does not encode,
// before anything changes.
func (s *Store) AppendEvents(id string, events []event.Event) (uint64, error) {
	if err := store.ValidID(id); err != nil {
		return 0, err
	}
	if len(events) == 0 {
		return 0, errors.New("no events to append")
	}
	raw, err := event.EncodeLog(id, events)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.harnesses[id]
	if h == nil {
		h = &harness{}
		s.harnesses[id] = h
	}
	first := uint64(len(h.events)) + 1
	h.events = append(h.events, raw...)
	return first, nil
}

// Events calls f with the harness's events numbered above `after`, in order, until f returns
// false or the log ends. f runs without the store's lock held, so it may use the store.
func (s *Store) Events(id string, after uint64, f func(event.Event) bool) error {
	if err := store.ValidID(id); err != nil {
		return err
	}
	s.mu.Lock()
	var log [][]byte
	if h := s.harnesses[id]; h != nil && after < uint64(len(h.events)) {
		// The log is only ever appended to (Delete drops the whole harness), so the entries
		// of this slice never change.
		log = h.events[after:len(h.events):len(h.events)]
	}
	s.mu.Unlock()
	for i, raw := range log {
		e, err := event.Decode(id, after+1+uint64(i), raw)
		if err != nil {
			return err
		}
		if !f(e) {
			return nil
		}
	}
	return nil
}

// Delete removes a harness: its state, index entry, task and events. A harness without a
// checkpoint is not found (an error wrapping store.ErrNotFound), as in the Pebble store.
func (s *Store) Delete(id string) error {
	if err := store.ValidID(id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.harnesses[id]
	if h == nil || h.state == nil {
		return fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	delete(s.harnesses, id)
	return nil
}
