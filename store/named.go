package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/klauspost/compress/zstd"

	"github.com/harness-edge/harness-edge/internal/ident"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// A named checkpoint is a copy of a harness's state at one checkpoint, kept under a name a
// person gave it, apart from the chain: the chain's retention (which drops the records before
// a new keyframe) never takes it away, and a rollback to it needs nothing else. Its key is
//
//	n/<id>/<name>   seq u64be, time (unix ns) u64be, task length u32be, the harness's task then
//	                (JSON), the state's canonical binary, zstd
//
// The task is kept too: a replan may change it (script actions) after the point.
const prefixNamed = "n/"

func namedKey(id, name string) []byte { return []byte(prefixNamed + id + "/" + name) }

// ErrInvalidName matches the error a named checkpoint's bad name gives.
var ErrInvalidName = errors.New("invalid checkpoint name")

// ValidName reports whether name can name a checkpoint: 1-64 letters, digits, '.', '_' and
// '-', starting with a letter or digit, and not all digits (a number names a sequence number).
func ValidName(name string) error {
	if !ident.Valid(name, 64, "._-") || allDigits(name) {
		return fmt.Errorf("%w %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit, not a number alone (numbers are sequence numbers)", ErrInvalidName, name)
	}
	return nil
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ErrNameTaken refuses a checkpoint name the harness already uses.
var ErrNameTaken = errors.New("it already has a checkpoint of that name")

// NamedPoint describes a named checkpoint.
type NamedPoint struct {
	Name string    `json:"name"`
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
	// Status and StepsDone say where the harness was.
	Status    statefmt.Status `json:"status"`
	StepsDone int             `json:"stepsDone"`
	Steps     int             `json:"steps"`
	Bytes     int             `json:"storedBytes"`
}

// SaveNamed keeps st, the state of the harness's checkpoint seq, under name, with events for
// the harness's log, in one synced batch. A name the harness already uses is refused.
func (s *Store) SaveNamed(id, name string, seq uint64, at time.Time, st *statefmt.HarnessState, events []event.Event) (NamedPoint, error) {
	if err := ValidID(id); err != nil {
		return NamedPoint{}, err
	}
	if err := ValidName(name); err != nil {
		return NamedPoint{}, err
	}
	if _, err := s.readIndex(id); err != nil {
		return NamedPoint{}, err
	}
	task, err := s.Task(id) // none for a harness persisted without one (a bare store's)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return NamedPoint{}, err
	}
	k := namedKey(id, name)
	if _, closer, err := s.db.Get(k); err == nil {
		closer.Close()
		return NamedPoint{}, fmt.Errorf("harness %s: %w: %q (pick another name)", id, ErrNameTaken, name)
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return NamedPoint{}, err
	}
	if len(task) > statefmt.MaxRawLen {
		return NamedPoint{}, fmt.Errorf("harness %s: its task is %d bytes, too large to keep with a named checkpoint", id, len(task))
	}
	raw, err := statefmt.EncodeBinary(st)
	if err != nil {
		return NamedPoint{}, err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return NamedPoint{}, err
	}
	v := binary.BigEndian.AppendUint64(nil, seq)
	v = binary.BigEndian.AppendUint64(v, uint64(at.UnixNano()))
	v = binary.BigEndian.AppendUint32(v, uint32(len(task)))
	v = append(v, task...)
	v = enc.EncodeAll(raw, v)
	enc.Close()
	evs, err := event.EncodeLog(id, events)
	if err != nil {
		return NamedPoint{}, err
	}
	h, err := s.acquire(id, true)
	if err != nil {
		return NamedPoint{}, err
	}
	defer h.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(k, v, nil)
	first, err := s.addEvents(b, id, h, evs)
	if err != nil {
		return NamedPoint{}, err
	}
	if err := s.commit(b, false); err != nil {
		h.nextEvent = 0
		return NamedPoint{}, fmt.Errorf("harness %s: checkpoint %s not committed: %w", id, name, err)
	}
	h.nextEvent = first + uint64(len(evs))
	return describeNamed(name, seq, at, st, len(v)), nil
}

func describeNamed(name string, seq uint64, at time.Time, st *statefmt.HarnessState, n int) NamedPoint {
	p := NamedPoint{Name: name, Seq: seq, At: at.UTC(), Status: st.Status, Bytes: n}
	if st.Plan != nil {
		p.Steps = len(st.Plan.Steps)
		for _, s := range st.Plan.Steps {
			if s.Status == statefmt.StepCompleted {
				p.StepsDone++
			}
		}
	}
	return p
}

// decodeNamed reads a named checkpoint's value.
func (s *Store) decodeNamed(id, name string, v []byte) (NamedPoint, *statefmt.HarnessState, []byte, error) {
	if len(v) < 20 || uint64(len(v)-20) < uint64(binary.BigEndian.Uint32(v[16:])) {
		return NamedPoint{}, nil, nil, &DamageError{ID: id, What: "checkpoint named " + name, Err: errors.New("shorter than its header")}
	}
	seq, at := binary.BigEndian.Uint64(v), time.Unix(0, int64(binary.BigEndian.Uint64(v[8:])))
	tlen := int(binary.BigEndian.Uint32(v[16:]))
	task := bytes.Clone(v[20 : 20+tlen])
	raw, err := s.zdec.DecodeAll(v[20+tlen:], nil)
	if err != nil {
		return NamedPoint{}, nil, nil, &DamageError{ID: id, What: "checkpoint named " + name, Err: err}
	}
	st, err := statefmt.DecodeBinaryOwned(raw)
	if err != nil {
		return NamedPoint{}, nil, nil, &DamageError{ID: id, What: "checkpoint named " + name, Err: err}
	}
	return describeNamed(name, seq, at, st, len(v)), st, task, nil
}

// Named lists a harness's named checkpoints, by name.
func (s *Store) Named(id string) ([]NamedPoint, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	lo := []byte(prefixNamed + id + "/")
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte(prefixNamed + id + "0")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := []NamedPoint{}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		p, _, _, err := s.decodeNamed(id, string(it.Key()[len(lo):]), v)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, it.Error()
}

// RestoreNamed returns the state and the task kept under name.
func (s *Store) RestoreNamed(id, name string) (NamedPoint, *statefmt.HarnessState, []byte, error) {
	if err := ValidID(id); err != nil {
		return NamedPoint{}, nil, nil, err
	}
	if err := ValidName(name); err != nil {
		return NamedPoint{}, nil, nil, err
	}
	v, closer, err := s.db.Get(namedKey(id, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return NamedPoint{}, nil, nil, partNotFound{fmt.Sprintf("harness %s has no checkpoint named %q", id, name)}
	}
	if err != nil {
		return NamedPoint{}, nil, nil, err
	}
	defer closer.Close()
	return s.decodeNamed(id, name, v)
}

// FirstSeq is the oldest checkpoint of the harness's chain the store still holds (the records
// before the last keyframes are released): RestoreAt reaches from there to the head.
func (s *Store) FirstSeq(id string) (uint64, error) { return s.firstSeq(id) }
