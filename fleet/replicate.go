package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// Heartbeat is what a device says about itself on he.fleet.DEV.hb after each pass.
type Heartbeat struct {
	Device    string    `json:"device"`
	At        time.Time `json:"at"`
	Harnesses int       `json:"harnesses"`
	// Backlog counts the records the device held and had not replicated at At.
	Backlog uint64 `json:"backlog"`
	// Released counts records the store released (a newer keyframe made them unneeded) before
	// they were replicated, since the daemon started: the intermediate states they held are
	// not on the hub; every head is.
	Released uint64 `json:"released"`
	Version  string `json:"version,omitempty"`
}

// Stats says what a Replicator has done since it started.
type Stats struct {
	Records, Events, Indexes, Tasks uint64
	// Duplicates are messages JetStream acknowledged as already held (sent again after a
	// restart or a lost acknowledgement).
	Duplicates uint64
	// Messages and Bytes count what JetStream acknowledged (heartbeats included): Bytes is the
	// messages' size on the wire, subject, headers and data.
	Messages, Bytes uint64
	Released        uint64
	Backlog         uint64
	Passes          uint64
	Online          bool
	LastError       string
	// Lags are, per replicated index entry, the time from its checkpoint's commit to
	// JetStream's acknowledgement (the newest 4096).
	Lags []time.Duration
}

// Replicator replicates a store to JetStream. Its Emit is an event sink: it only wakes the
// replication loop (Run), which reads what the store committed and publishes it, so a step
// never waits on the network. Run polls too, so a missed wake-up delays replication by at
// most Poll.
type Replicator struct {
	Device  string
	Version string
	// Poll is how often Run looks at the store without a wake-up, and how soon it tries again
	// after a failure (default 1 s).
	Poll time.Duration
	// Settle is how long Run waits after a wake-up for more events, so that a burst of steps
	// goes out in one pass (default 25 ms).
	Settle time.Duration
	Log    *slog.Logger

	js   jetstream.JetStream
	wake chan struct{}
	// before, when set, runs before each pass of Run (the link makes sure of the streams).
	before func(context.Context)

	mu    sync.Mutex
	stats Stats
	// db is the store Run replicates (nil before it starts).
	db atomic.Pointer[store.Store]
	// held are records copied as they were committed (Emit sees each checkpoint's event
	// before the harness writes its next checkpoint): a keyframe releases the records before
	// it at once, and those the replicator had not read yet are sent from here. heldBytes
	// is bounded by MaxHeld; past it a record is not held, and counted as released if the
	// store lets it go before it is sent.
	heldMu    sync.Mutex
	held      map[string]map[uint64][]byte
	heldBytes int
	// What the last heartbeat said (harnesses, backlog, released), and when it went out.
	lastSaid [3]uint64
	lastBeat time.Time
}

// MaxHeld bounds the memory of records held for replication (see Replicator.held).
const MaxHeld = 32 << 20

// NewReplicator makes a replicator for the device over a JetStream context. Run starts it.
func NewReplicator(js jetstream.JetStream, device string) (*Replicator, error) {
	if err := ValidDevice(device); err != nil {
		return nil, err
	}
	return &Replicator{Device: device, js: js, wake: make(chan struct{}, 1), Poll: time.Second, Settle: 25 * time.Millisecond}, nil
}

// Emit wakes the replication loop (event.Sink). It never blocks on the network: for a
// checkpoint's event it copies the record just committed from the local store (one read),
// so that a keyframe's release cannot take it before it is sent.
func (r *Replicator) Emit(e event.Event) {
	if e.Type == event.Checkpoint && e.Seq > 0 {
		if db := r.db.Load(); db != nil {
			if env, err := db.StoredRecord(e.HarnessID, e.Seq); err == nil {
				r.hold(e.HarnessID, e.Seq, env)
			}
		}
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Replicator) hold(id string, seq uint64, env []byte) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	if r.heldBytes+len(env) > MaxHeld {
		return
	}
	if r.held == nil {
		r.held = map[string]map[uint64][]byte{}
	}
	if r.held[id] == nil {
		r.held[id] = map[uint64][]byte{}
	}
	if _, ok := r.held[id][seq]; !ok {
		r.held[id][seq] = env
		r.heldBytes += len(env)
	}
}

// heldRecord returns a held record (nil when it is not held).
func (r *Replicator) heldRecord(id string, seq uint64) []byte {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	return r.held[id][seq]
}

// dropHeld lets go of the held records of id up to seq (they are sent, or in the store).
func (r *Replicator) dropHeld(id string, upTo uint64) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	for seq, env := range r.held[id] {
		if seq <= upTo {
			r.heldBytes -= len(env)
			delete(r.held[id], seq)
		}
	}
	if len(r.held[id]) == 0 {
		delete(r.held, id)
	}
}

// Stats returns a copy of what the replicator has done.
func (r *Replicator) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Lags = slices.Clone(s.Lags)
	return s
}

func (r *Replicator) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// Run replicates db until ctx ends: a pass at each wake-up and every Poll. A pass that fails
// (the link is down) is tried again at the next; the cursor keeps what was acknowledged.
func (r *Replicator) Run(ctx context.Context, db *store.Store) error {
	cur, err := loadCursor(db.Dir(), r.Device)
	if err != nil {
		return err
	}
	r.db.Store(db)
	defer r.db.Store(nil)
	tick := time.NewTicker(r.Poll)
	defer tick.Stop()
	defer r.saveCursor(db, cur)
	wasOnline := true
	var saved time.Time
	for {
		if r.before != nil {
			r.before(ctx)
		}
		err := r.pass(ctx, db, cur)
		if time.Since(saved) >= CursorSync {
			r.saveCursor(db, cur)
			saved = time.Now()
		}
		if ctx.Err() != nil {
			return nil
		}
		online := err == nil
		r.mu.Lock()
		r.stats.Passes++
		r.stats.Online = online
		if err != nil {
			r.stats.LastError = err.Error()
		}
		r.mu.Unlock()
		if online != wasOnline {
			if online {
				r.log().Info("fleet: replicating again", "device", r.Device)
			} else {
				r.log().Warn("fleet: replication paused; the backlog is kept and sent when the link returns", "device", r.Device, "err", err)
			}
			wasOnline = online
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-r.wake:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(r.Settle):
			}
		}
	}
}

// Sync runs one pass: everything db holds now is replicated when it returns nil.
func (r *Replicator) Sync(ctx context.Context, db *store.Store) error {
	cur, err := loadCursor(db.Dir(), r.Device)
	if err != nil {
		return err
	}
	err = r.pass(ctx, db, cur)
	r.saveCursor(db, cur)
	return err
}

// CursorSync is how often Run writes the cursor (synced) while it moves: a device that
// crashes sends again at most this much, which JetStream drops as duplicates.
const CursorSync = time.Second

func (r *Replicator) saveCursor(db *store.Store, cur *cursor) {
	if !cur.dirty {
		return
	}
	if err := cur.save(db.Dir()); err != nil {
		r.log().Error("fleet: saving the replication cursor", "err", err)
		return
	}
	cur.dirty = false
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

// pass publishes, harness by harness, what the store holds beyond the cursor: the task, the
// records up to the index entry's head, the events, then the index entry (only once every
// record it names is sent, so that a reader never sees an entry ahead of its records).
func (r *Replicator) pass(ctx context.Context, db *store.Store, cur *cursor) error {
	list, err := db.List()
	if err != nil {
		return err
	}
	var backlog uint64
	var failed error
	for _, e := range list {
		if e.Damaged != "" {
			continue
		}
		if failed != nil {
			if at := cur.Harnesses[e.ID]; at != nil && at.Gen == e.CreatedAt.UnixNano() {
				backlog += e.HeadSeq - min(at.Record, e.HeadSeq)
			} else {
				backlog += e.HeadSeq
			}
			continue
		}
		if err := r.harness(ctx, db, cur, e.ID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				continue // deleted meanwhile
			}
			failed = err
			backlog += e.HeadSeq
		}
	}
	r.mu.Lock()
	r.stats.Backlog = backlog
	released := r.stats.Released
	r.mu.Unlock()
	if failed != nil {
		return failed
	}
	// The heartbeat goes out when what it says changes, and every HeartbeatEvery otherwise.
	now := time.Now()
	said := [3]uint64{uint64(len(list)), backlog, released}
	if said == r.lastSaid && now.Sub(r.lastBeat) < HeartbeatEvery {
		return nil
	}
	hb, _ := json.Marshal(Heartbeat{Device: r.Device, At: now.UTC(), Harnesses: len(list), Backlog: backlog, Released: released, Version: r.Version})
	if err := r.publish(ctx, heartbeatSubject(r.Device), "", nil, hb, StreamIndex); err != nil {
		return err
	}
	r.lastSaid, r.lastBeat = said, now
	return nil
}

// HeartbeatEvery is how often a device's heartbeat goes out while nothing it says changes.
const HeartbeatEvery = 5 * time.Second

func (r *Replicator) harness(ctx context.Context, db *store.Store, cur *cursor, id string) error {
	idx, err := db.Index(id)
	if err != nil {
		return err
	}
	gen := idx.CreatedAt.UnixNano()
	at := cur.Harnesses[id]
	if at == nil || at.Gen != gen {
		at = &harnessAt{Gen: gen}
	}
	before := *at
	defer func() {
		if *at != before {
			cur.Harnesses[id] = at
			cur.dirty = true
		}
	}()
	msgID := func(kind string, n uint64) string {
		return r.Device + ":" + id + ":" + strconv.FormatInt(gen, 36) + ":" + kind + ":" + strconv.FormatUint(n, 10)
	}
	hdr := func(n uint64) nats.Header {
		h := nats.Header{}
		h.Set(HeaderHarness, id)
		h.Set(HeaderDevice, r.Device)
		h.Set(HeaderSeq, strconv.FormatUint(n, 10))
		h.Set(HeaderGen, strconv.FormatInt(gen, 36))
		return h
	}
	if task, err := db.Task(id); err == nil {
		if d := digest(task); d != at.Task {
			if err := r.publish(ctx, Subject(r.Device, "task", id), r.Device+":"+id+":"+strconv.FormatInt(gen, 36)+":task:"+d, hdr(0), task, StreamLog); err != nil {
				return err
			}
			at.Task = d
			r.count(func(s *Stats) { s.Tasks++ })
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	sendRecord := func(seq uint64, env []byte) error {
		if err := r.publish(ctx, Subject(r.Device, "rec", id), msgID("r", seq), hdr(seq), env, StreamLog); err != nil {
			return err
		}
		at.Record = seq
		r.count(func(s *Stats) { s.Records++ })
		return nil
	}
	errEnough := errors.New("past the head")
	err = db.StoredRecords(id, at.Record, func(seq uint64, env []byte) error {
		if seq > idx.HeadSeq {
			return errEnough
		}
		// Records a keyframe released before they were read: from those held, in order, as
		// far as they go.
		for at.Record+1 < seq {
			held := r.heldRecord(id, at.Record+1)
			if held == nil {
				break
			}
			if err := sendRecord(at.Record+1, held); err != nil {
				return err
			}
		}
		if gap := seq - at.Record - 1; gap > 0 {
			r.count(func(s *Stats) { s.Released += gap })
		}
		return sendRecord(seq, env)
	})
	r.dropHeld(id, at.Record)
	if err != nil && !errors.Is(err, errEnough) {
		return err
	}
	err = db.StoredEvents(id, at.Event, func(n uint64, data []byte) error {
		if err := r.publish(ctx, Subject(r.Device, "evt", id), msgID("e", n), hdr(n), data, StreamLog); err != nil {
			return err
		}
		at.Event = n
		r.count(func(s *Stats) { s.Events++ })
		return nil
	})
	if err != nil {
		return err
	}
	if at.Record < idx.HeadSeq {
		// The head's records were released meanwhile by a newer keyframe: the next pass sends
		// that one, with its index entry.
		return nil
	}
	raw, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	if d := digest(raw); d != at.Index {
		if err := r.publish(ctx, Subject(r.Device, "idx", id), msgID("i", idx.HeadSeq)+":"+d, hdr(idx.HeadSeq), raw, StreamIndex); err != nil {
			return err
		}
		at.Index = d
		lag := time.Since(idx.LastCheckpointAt)
		r.count(func(s *Stats) {
			s.Indexes++
			if len(s.Lags) == 4096 {
				s.Lags = slices.Delete(s.Lags, 0, 1)
			}
			s.Lags = append(s.Lags, lag)
		})
	}
	return nil
}

func (r *Replicator) count(f func(*Stats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// publishTimeout bounds one publish's wait for JetStream's acknowledgement.
const publishTimeout = 5 * time.Second

func (r *Replicator) publish(ctx context.Context, subj, msgID string, hdr nats.Header, data []byte, stream string) error {
	m := nats.NewMsg(subj)
	if hdr != nil {
		m.Header = hdr
	}
	m.Data = data
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(stream)}
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	ack, err := r.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		return fmt.Errorf("publishing %s: %w", subj, err)
	}
	r.count(func(s *Stats) {
		s.Messages++
		s.Bytes += uint64(wireSize(m))
		if ack.Duplicate {
			s.Duplicates++
		}
	})
	return nil
}

// wireSize is about what a message takes on the wire: its subject, its headers as NATS writes
// them (the message id and the stream JetStream expects included) and its data.
func wireSize(m *nats.Msg) int {
	n := len(m.Subject) + len(m.Data) + len("NATS/1.0\r\n\r\n")
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}
