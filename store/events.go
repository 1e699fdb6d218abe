package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/harness-edge/harness-edge/statefmt/event"
)

// The durable event log: each harness's events are stored under e/<id>/<n> with n counting from
// 1, append-only, in the encoding of package event; the store never reorders or rewrites them.
// Events persisted with a checkpoint are in the checkpoint's batch: both are durable or neither
// is.

// nextEvent returns the number the harness's next event gets, reading the log's end the first
// time. h.mu must be held.
func (s *Store) nextEvent(id string, h *harness) (uint64, error) {
	if h.nextEvent > 0 {
		return h.nextEvent, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: eventKey(id, 0), UpperBound: eventKey(id, ^uint64(0))})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	h.nextEvent = 1
	if it.Last() {
		k := it.Key()
		h.nextEvent = binary.BigEndian.Uint64(k[len(k)-8:]) + 1
	}
	if err := it.Error(); err != nil {
		h.nextEvent = 0
		return 0, damaged(id, "event log", err)
	}
	return h.nextEvent, nil
}

// addEvents puts encoded events into b with their numbers and returns the first; h.mu must be
// held. The harness's counter moves only when the caller commits.
func (s *Store) addEvents(b *pebble.Batch, id string, h *harness, events [][]byte) (uint64, error) {
	first, err := s.nextEvent(id, h)
	if err != nil {
		return 0, err
	}
	for i, e := range events {
		_ = b.Set(eventKey(id, first+uint64(i)), e, nil)
	}
	return first, nil
}

// AppendEvents appends events to the harness's log in one synced batch and returns the number
// of the first. When it returns nil the events are durable.
func (s *Store) AppendEvents(id string, events []event.Event) (uint64, error) {
	if err := ValidID(id); err != nil {
		return 0, err
	}
	if len(events) == 0 {
		return 0, errors.New("no events to append")
	}
	raw, err := event.EncodeLog(id, events)
	if err != nil {
		return 0, err
	}
	h, err := s.acquire(id, true)
	if err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	first, err := s.addEvents(b, id, h, raw)
	if err != nil {
		return 0, err
	}
	if err := s.commit(b, false); err != nil {
		h.nextEvent = 0 // unknown: read the log's end again
		return 0, fmt.Errorf("harness %s: events not committed: %w", id, err)
	}
	h.nextEvent = first + uint64(len(events))
	return first, nil
}

// Events calls f with the harness's events numbered above `after`, in order, until f returns
// false or the log ends. An event that does not decode ends it with an error naming it. The
// events of a checkpoint whose fsync is still under way (Extras.NoSyncWait) are not read yet.
func (s *Store) Events(id string, after uint64, f func(event.Event) bool) error {
	if err := ValidID(id); err != nil {
		return err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: eventKey(id, after+1), UpperBound: s.eventsBound(id)})
	if err != nil {
		return err
	}
	defer it.Close()
	n := after
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		n = binary.BigEndian.Uint64(k[len(k)-8:])
		v, err := it.ValueAndErr()
		if err != nil {
			return damaged(id, fmt.Sprintf("event %d", n), err)
		}
		e, err := event.Decode(id, n, v)
		if err != nil {
			return err
		}
		if !f(e) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		what := fmt.Sprintf("the events after event %d", n)
		if n == 0 {
			what = "its event log"
		}
		return damaged(id, what, err)
	}
	return nil
}

// eventsBound is the key the harness's event log is read up to: past its last event, or its
// first event not durable yet (see Store.inflight).
func (s *Store) eventsBound(id string) []byte {
	if p, ok := s.inflight.Load(id); ok && p.(*pending).firstEvent > 0 {
		return eventKey(id, p.(*pending).firstEvent)
	}
	return eventKey(id, ^uint64(0))
}
