package fleet

import (
	"bytes"
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
	// Read counts the harnesses passes read from the store: a pass reads only those whose
	// index entry moved since everything of theirs was acknowledged, or that an event named
	// meanwhile (all of them in a full pass, every FullPassEvery).
	Read      uint64
	Online    bool
	LastError string
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

	// AckWait bounds the wait for JetStream's acknowledgement of a message (default 5 s):
	// past it the message counts as not sent, and the next pass sends it again.
	AckWait time.Duration

	js   jetstream.JetStream
	ajs  jetstream.JetStream // js's connection, publishing asynchronously (asyncJS)
	wake chan struct{}
	// before, when set, runs before each pass of Run (the link makes sure of the streams).
	before func(context.Context)
	// sentTask is, per harness, the task the cursor's digest was taken of (passes only).
	sentTask map[string]sentTask
	// done is, per harness, the index entry of the last pass that had all it read
	// acknowledged, index entry included; lastFull when a pass last read every harness
	// (passes only).
	done     map[string]store.IndexEntry
	lastFull time.Time
	// dirty are the harnesses Emit saw an event of since the last pass began.
	dirtyMu sync.Mutex
	dirty   map[string]bool

	mu    sync.Mutex
	stats Stats
	// db is the store Run replicates (nil before it starts).
	db atomic.Pointer[store.Store]
	// held are records copied as they were announced (Emit reads each checkpoint's record
	// when it hears of it; the store keeps a record released by the keyframe written just
	// after it until then): a keyframe releases the records before it at once, and those the
	// replicator had not read yet are sent from here. heldBytes
	// is bounded by MaxHeld; past it a record is not held, and counted as released if the
	// store lets it go before it is sent.
	heldMu    sync.Mutex
	held      map[string]map[uint64][]byte
	heldBytes int
	// directFailed is when a direct get of the hub last failed (hubHolds; passes only): a
	// device not allowed it waits out the whole timeout, so it is not asked again for
	// directRetry.
	directFailed time.Time
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
	r.dirtyMu.Lock()
	if r.dirty == nil {
		r.dirty = map[string]bool{}
	}
	r.dirty[e.HarnessID] = true
	r.dirtyMu.Unlock()
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

// Attach gives the replicator the store it replicates before Run starts (Run gives it too):
// Emit copies the records of the checkpoints it hears of from then on, so that a keyframe
// written before the first pass cannot release one unsent.
func (r *Replicator) Attach(db *store.Store) { r.db.Store(db) }

// Run replicates db until ctx ends: a pass at each wake-up and every Poll. A pass that fails
// (the link is down) is tried again at the next; the cursor keeps what was acknowledged.
func (r *Replicator) Run(ctx context.Context, db *store.Store) error {
	// Whatever ends Run lets go of the store (Attach may have given it before), so that Emit
	// never reads a store the daemon closes after Run returned.
	r.db.Store(db)
	defer r.db.Store(nil)
	cur, err := loadCursor(db.Dir(), r.Device)
	if err != nil {
		return err
	}
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

// pass publishes what the store holds beyond the cursor, in two windows. First, harness by
// harness, the task, the records up to the index entry's head and the events, all pipelined
// (window below); once JetStream acknowledged them, the index entries of the harnesses whose
// records all went through (so that a reader never sees an entry ahead of its records) and the
// heartbeat, pipelined too. The cursor moves, message by message, only over what JetStream
// acknowledged: a message that fails stops its harness's cursor there, and the next pass sends
// it and what followed it again (JetStream drops the copies it holds, by Nats-Msg-Id).
func (r *Replicator) pass(ctx context.Context, db *store.Store, cur *cursor) error {
	r.dirtyMu.Lock()
	dirty := r.dirty
	r.dirty = nil
	r.dirtyMu.Unlock()
	list, err := db.List()
	if err != nil {
		return err
	}
	js, err := r.asyncJS()
	if err != nil {
		return err
	}
	w := &window{r: r, js: js, failed: map[string]error{}}
	if r.sentTask == nil {
		r.sentTask = map[string]sentTask{}
	}
	if r.done == nil {
		r.done = map[string]store.IndexEntry{}
	}
	full := time.Since(r.lastFull) >= FullPassEvery
	var indexes []func() error
	var failed error
	var read []store.IndexEntry
	digests := map[string]string{}
	for _, e := range list {
		if e.Damaged != "" {
			continue
		}
		// A harness whose index entry has not moved since all of it was acknowledged, and
		// that no event named since, has nothing new: a pass reads only what changed, so
		// that its cost follows the steps, not the store's harnesses.
		if done, ok := r.done[e.ID]; ok && done == e && !dirty[e.ID] && !full {
			continue
		}
		read = append(read, e)
		next, d, err := r.harness(ctx, w, db, cur, e)
		digests[e.ID] = d
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				continue // deleted meanwhile
			}
			w.fail(e.ID, err)
			if !js.Conn().IsConnected() || ctx.Err() != nil {
				failed = err
				break
			}
			continue // this harness waits for the next pass; the others go on
		}
		if next != nil {
			indexes = append(indexes, next)
		}
	}
	w.wait(ctx)
	listed := map[string]bool{}
	var backlog uint64
	for _, e := range list {
		listed[e.ID] = true
		if e.Damaged != "" {
			continue
		}
		at := cur.Harnesses[e.ID]
		if at != nil && at.Gen == e.CreatedAt.UnixNano() {
			r.dropHeld(e.ID, at.Record)
			backlog += e.HeadSeq - min(at.Record, e.HeadSeq)
		} else {
			backlog += e.HeadSeq
		}
	}
	for id := range r.sentTask {
		if !listed[id] {
			delete(r.sentTask, id) // deleted
		}
	}
	for id := range r.done {
		if !listed[id] {
			delete(r.done, id)
		}
	}
	r.mu.Lock()
	r.stats.Read += uint64(len(read))
	r.stats.Backlog = backlog
	released := r.stats.Released
	r.mu.Unlock()
	if failed != nil {
		return failed
	}
	for _, next := range indexes {
		if err := next(); err != nil {
			failed = err
			break
		}
	}
	// The heartbeat goes out when what it says changes, and every HeartbeatEvery otherwise.
	now := time.Now()
	said := [3]uint64{uint64(len(list)), backlog, released}
	if failed == nil && (said != r.lastSaid || now.Sub(r.lastBeat) >= HeartbeatEvery) {
		hb, _ := json.Marshal(Heartbeat{Device: r.Device, At: now.UTC(), Harnesses: len(list), Backlog: backlog, Released: released, Version: r.Version})
		err := w.publish(ctx, "", heartbeatSubject(r.Device), "", nil, hb, StreamIndex, func() {
			r.lastSaid, r.lastBeat = said, now
		})
		if err != nil {
			failed = err
		}
	}
	if err := w.wait(ctx); err != nil && failed == nil {
		failed = err
	}
	for _, e := range read {
		at := cur.Harnesses[e.ID]
		if w.failed[e.ID] == nil && at != nil && at.Gen == e.CreatedAt.UnixNano() && at.Record >= e.HeadSeq && at.Index == digests[e.ID] {
			r.done[e.ID] = e
		} else {
			delete(r.done, e.ID)
		}
	}
	if full && failed == nil {
		r.lastFull = time.Now()
	}
	return failed
}

// FullPassEvery is how often a pass reads every harness of the store, those whose index entry
// has not moved included (a safety net: a change that moves no index entry and emits no event).
const FullPassEvery = 30 * time.Second

// sentTask is a harness's task as sent (Replicator.sentTask).
type sentTask struct {
	gen    int64
	digest string
	task   []byte
}

// HeartbeatEvery is how often a device's heartbeat goes out while nothing it says changes.
const HeartbeatEvery = 5 * time.Second

// harness puts in the window what the store holds of one harness beyond the cursor: its task
// when it changed, its records up to the index entry's head (those a keyframe released from
// the copies held), and its events. It returns what sends the index entry once the window is
// acknowledged (nil when nothing is to be sent), and the entry's digest.
func (r *Replicator) harness(ctx context.Context, w *window, db *store.Store, cur *cursor, idx store.IndexEntry) (func() error, string, error) {
	id := idx.ID
	gen := idx.CreatedAt.UnixNano()
	at := cur.Harnesses[id]
	if at == nil || at.Gen != gen {
		at = &harnessAt{Gen: gen}
		cur.Harnesses[id] = at
		cur.dirty = true
	}
	acked := func(f func()) func() {
		return func() { f(); cur.dirty = true }
	}
	genTag := strconv.FormatInt(gen, 36)
	msgID := func(kind string, n uint64) string {
		return r.Device + ":" + id + ":" + genTag + ":" + kind + ":" + strconv.FormatUint(n, 10)
	}
	hdr := func(n uint64) nats.Header {
		return nats.Header{
			HeaderHarness: {id},
			HeaderDevice:  {r.Device},
			HeaderSeq:     {strconv.FormatUint(n, 10)},
			HeaderGen:     {genTag},
		}
	}
	if task, err := db.Task(id); err == nil {
		// The task rarely changes: compared with the one sent before hashing it.
		if sent := r.sentTask[id]; sent.gen != gen || sent.digest != at.Task || !bytes.Equal(sent.task, task) {
			d := digest(task)
			if d == at.Task {
				r.sentTask[id] = sentTask{gen: gen, digest: d, task: task}
			} else {
				err := w.publish(ctx, id, Subject(r.Device, "task", id), r.Device+":"+id+":"+genTag+":task:"+d, hdr(0), task, StreamLog, acked(func() {
					at.Task = d
					r.sentTask[id] = sentTask{gen: gen, digest: d, task: task}
					r.count(func(s *Stats) { s.Tasks++ })
				}))
				if err != nil {
					return nil, "", err
				}
			}
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, "", err
	}
	recSubj := Subject(r.Device, "rec", id)
	sent := at.Record // the last record put in the window
	// The store released records after the cursor, and no copy of the first is held: after a
	// restart the cursor lags what JetStream acknowledged (it is written every CursorSync),
	// and the hub may hold them all. Asked before the store's records are read, so that no
	// iterator stays open across the request.
	var hub uint64
	if at.Record+1 < idx.KeyframeSeq && r.heldRecord(id, at.Record+1) == nil {
		hub = r.hubHolds(ctx, id, genTag)
	}
	sendRecord := func(seq uint64, env []byte, gap uint64) error {
		sent = seq
		return w.publish(ctx, id, recSubj, msgID("r", seq), hdr(seq), env, StreamLog, acked(func() {
			at.Record = seq
			r.count(func(s *Stats) {
				s.Records++
				s.Released += gap
			})
		}))
	}
	errEnough := errors.New("past the head")
	err := db.StoredRecords(id, at.Record, func(seq uint64, env []byte) error {
		if seq > idx.HeadSeq {
			return errEnough
		}
		// Records a keyframe released before they were read: from those held, in order, as
		// far as they go.
		for sent+1 < seq {
			held := r.heldRecord(id, sent+1)
			if held == nil {
				break
			}
			if err := sendRecord(sent+1, held, 0); err != nil {
				return err
			}
		}
		// Of the records released unsent, only those the hub does not hold are lost.
		return sendRecord(seq, env, seq-1-min(seq-1, max(sent, hub)))
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, "", err
	}
	evtSubj := Subject(r.Device, "evt", id)
	err = db.StoredEvents(id, at.Event, func(n uint64, data []byte) error {
		return w.publish(ctx, id, evtSubj, msgID("e", n), hdr(n), data, StreamLog, acked(func() {
			at.Event = n
			r.count(func(s *Stats) { s.Events++ })
		}))
	})
	if err != nil {
		return nil, "", err
	}
	raw, err := json.Marshal(idx)
	if err != nil {
		return nil, "", err
	}
	d := digest(raw)
	if d == at.Index {
		return nil, d, nil
	}
	return func() error {
		if w.failed[id] != nil || at.Record < idx.HeadSeq {
			// A message of the harness failed (the next pass sends it again), or the head's
			// records were released meanwhile by a newer keyframe (the next pass sends that
			// one, with its index entry).
			return nil
		}
		return w.publish(ctx, id, Subject(r.Device, "idx", id), msgID("i", idx.HeadSeq)+":"+d, hdr(idx.HeadSeq), raw, StreamIndex, acked(func() {
			at.Index = d
			lag := time.Since(idx.LastCheckpointAt)
			r.count(func(s *Stats) {
				s.Indexes++
				if len(s.Lags) == 4096 {
					s.Lags = slices.Delete(s.Lags, 0, 1)
				}
				s.Lags = append(s.Lags, lag)
			})
		}))
	}, d, nil
}

// hubHolds is the newest record of harness id (of generation gen) that the hub holds, read with
// a direct get of the last message on its record subject; 0 when it holds none of that
// generation, or cannot say (a stream without direct gets, a device not allowed them: see
// docs/fleet.md).
func (r *Replicator) hubHolds(ctx context.Context, id, gen string) uint64 {
	if !r.directFailed.IsZero() && time.Since(r.directFailed) < directRetry {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	m, err := r.js.Conn().RequestWithContext(ctx, directGetLast(StreamLog, Subject(r.Device, "rec", id)), nil)
	if err != nil || (m.Header.Get("Status") != "" && m.Header.Get("Status") != "404") {
		// No responders (a stream without direct gets), no answer (a device not allowed the
		// request: NATS drops it, and says so only to the connection's error handler).
		r.directFailed = time.Now()
		return 0
	}
	if m.Header.Get(HeaderGen) != gen {
		return 0 // none of this generation (404: none at all)
	}
	seq, err := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64)
	if err != nil {
		return 0
	}
	return seq
}

// directTimeout bounds hubHolds' request; directRetry is how long a failed one is not tried
// again.
const (
	directTimeout = 2 * time.Second
	directRetry   = time.Minute
)

// directGetLast is the JetStream API subject that returns the last message of stream on subj.
func directGetLast(stream, subj string) string { return "$JS.API.DIRECT.GET." + stream + "." + subj }

func (r *Replicator) count(f func(*Stats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// publishTimeout is how long a published message waits for JetStream's acknowledgement by
// default (Replicator.AckWait).
const publishTimeout = 5 * time.Second

// Window bounds the messages a pass has sent and JetStream has not yet acknowledged: past
// WindowMessages of them or WindowBytes of their data, the pass waits for the oldest.
const (
	WindowMessages = 256
	WindowBytes    = 4 << 20
)

// asyncJS returns the JetStream context the replicator publishes with: its own, on the same
// connection, so that its acknowledgements time out after AckWait.
func (r *Replicator) asyncJS() (jetstream.JetStream, error) {
	if r.ajs != nil {
		return r.ajs, nil
	}
	js, err := jetstream.New(r.js.Conn(), jetstream.WithPublishAsyncTimeout(r.ackWait()), jetstream.WithPublishAsyncMaxPending(2*WindowMessages))
	if err != nil {
		return nil, err
	}
	r.ajs = js
	return js, nil
}

func (r *Replicator) ackWait() time.Duration {
	if r.AckWait > 0 {
		return r.AckWait
	}
	return publishTimeout
}

// window is what a pass has published and not yet seen acknowledged, in the order it was
// published. Messages go out one after the other on one connection without waiting (JetStream
// stores a connection's messages to a stream in the order they arrive); the acknowledgements
// are taken in that same order, and each one applies its message's step of the cursor. Once a
// message of a harness failed, the harness's later messages, even acknowledged, move nothing:
// the cursor never passes a message JetStream did not acknowledge.
type window struct {
	r       *Replicator
	js      jetstream.JetStream
	pending []inFlight
	bytes   int
	// failed holds the first failure of each harness in this pass ("" is the heartbeat).
	failed map[string]error
	err    error
}

type inFlight struct {
	key   string
	subj  string
	fut   jetstream.PubAckFuture
	size  int
	wire  int
	acked func()
}

// publish sends a message without waiting for its acknowledgement (past the window's bounds
// it first waits for the oldest ones). acked runs once JetStream acknowledged it, unless a
// message of the same key sent before it failed; once one has failed, the key's later messages
// are not sent in this pass.
func (w *window) publish(ctx context.Context, key, subj, msgID string, hdr nats.Header, data []byte, stream string, acked func()) error {
	for len(w.pending) > 0 && (len(w.pending) >= WindowMessages || w.bytes+len(data) > WindowBytes) {
		w.settle(ctx)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if w.failed[key] != nil {
		return nil // the next pass sends it, after the one that failed
	}
	m := &nats.Msg{Subject: subj, Header: hdr, Data: data}
	// No retry on "no responders" inside the client: it would send the message again later,
	// after the ones that follow it. The next pass sends it again, in order.
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(stream), jetstream.WithRetryAttempts(0)}
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	fut, err := w.js.PublishMsgAsync(m, opts...)
	if err != nil {
		err = fmt.Errorf("publishing %s: %w", subj, err)
		w.fail(key, err)
		return err
	}
	w.pending = append(w.pending, inFlight{key: key, subj: subj, fut: fut, size: len(data), wire: wireSize(m), acked: acked})
	w.bytes += len(data)
	return nil
}

// settle waits for the oldest message's acknowledgement (at most AckWait) and applies it.
func (w *window) settle(ctx context.Context) {
	p := w.pending[0]
	w.pending = w.pending[1:]
	w.bytes -= p.size
	timer := time.NewTimer(w.r.ackWait())
	defer timer.Stop()
	var err error
	select {
	case ack := <-p.fut.Ok():
		w.r.count(func(s *Stats) {
			s.Messages++
			s.Bytes += uint64(p.wire)
			if ack.Duplicate {
				s.Duplicates++
			}
		})
		if w.failed[p.key] == nil {
			p.acked()
		}
		return
	case err = <-p.fut.Err():
	case <-timer.C:
		err = jetstream.ErrAsyncPublishTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}
	if errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
		err = fmt.Errorf("no acknowledgement from JetStream within %s (%w): it is sent again", w.r.ackWait(), err)
	}
	w.fail(p.key, fmt.Errorf("publishing %s: %w", p.subj, err))
}

func (w *window) fail(key string, err error) {
	if w.failed[key] == nil {
		w.failed[key] = err
	}
	if w.err == nil {
		w.err = err
	}
}

// wait settles every message in the window and returns the first failure of the pass.
func (w *window) wait(ctx context.Context) error {
	for len(w.pending) > 0 {
		w.settle(ctx)
	}
	return w.err
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
