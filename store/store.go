package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/harness-edge/harness-edge/store/trust"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/klauspost/compress/zstd"

	"github.com/harness-edge/harness-edge/statefmt"
)

// The key prefixes (see the package doc).
const (
	prefixIndex  = "i/"
	prefixChain  = "c/"
	prefixEvents = "e/"
	prefixTask   = "t/"
)

// ValidID reports whether id can name a harness in the store: 1-128 characters of letters,
// digits, '.', '_' and '-', starting with a letter or digit (statefmt.ValidHarnessID, which a
// state's own validation applies too).
func ValidID(id string) error {
	if !statefmt.ValidHarnessID(id) {
		return invalidID(id)
	}
	return nil
}

// ErrInvalidID matches (errors.Is) every error ValidID returns.
var ErrInvalidID = errors.New("invalid harness id")

type invalidID string

func (e invalidID) Error() string {
	return fmt.Sprintf("harness id %q is not valid: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", string(e))
}

func (e invalidID) Is(target error) bool { return target == ErrInvalidID }

func chainKey(id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefixChain+id+"/"), seq)
}

func eventKey(id string, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefixEvents+id+"/"), n)
}

// IndexEntry is what the store keeps for listing a harness without replaying it. It is written
// in the same synced batch as each checkpoint, so it always names the durable head.
type IndexEntry struct {
	ID               string          `json:"id"`
	AgentName        string          `json:"agentName"`
	TaskID           string          `json:"taskId"`
	Status           statefmt.Status `json:"status"`
	ParentHarnessID  string          `json:"parentHarnessId,omitempty"`
	CreatedAt        time.Time       `json:"createdAt"`
	UpdatedAt        time.Time       `json:"updatedAt"`
	HeadSeq          uint64          `json:"headSeq"`
	KeyframeSeq      uint64          `json:"keyframeSeq"`
	HeadStateBytes   uint64          `json:"headStateBytes"` // sizes a restore's buffer
	LastCheckpointAt time.Time       `json:"lastCheckpointAt"`
	// Damaged, when set, says why the harness cannot be read: an acknowledged checkpoint the
	// store lost, or an index entry that is damaged. The other fields may be zero then.
	Damaged string `json:"damaged,omitempty"`
	// WaitingForRoom is set only in a daemon's list, never stored: a full disk stopped the
	// harness, and the daemon goes on with it once the disk has room. Its status is that of its
	// last checkpoint: paused for the full disk, or running when even the pause was refused.
	WaitingForRoom bool `json:"waitingForRoom,omitempty"`
}

// Checkpoint describes one persisted record.
type Checkpoint struct {
	Seq         uint64
	Kind        statefmt.RecordKind
	StateBytes  int // the state's canonical encoding
	RawBytes    int // the record's payload before compression
	StoredBytes int // the record as stored (envelope, compressed payload)
	// Events are the events persisted with it (PersistWith), numbered, the checkpoint's own
	// event last when one was asked for.
	Events []event.Event
	// Prepare is the checkpoint's state-management cost: everything Persist did before the
	// Pebble commit (incremental encode, delta, compression, envelope, index, batch). The bench
	// suite reports it per step.
	Prepare time.Duration

	// pending is the fsync still to wait for (Extras.NoSyncWait), nil once durable.
	pending *pending
}

// Wait waits until the checkpoint is durable and returns it. A checkpoint persisted with
// Extras.NoSyncWait is in the log but perhaps not on the disk until Wait returns nil; for any
// other, Wait returns it at once. An error means the fsync failed: the checkpoint may be lost,
// and the store has dropped what it held in memory for the harness.
func (c Checkpoint) Wait() (Checkpoint, error) {
	if c.pending == nil {
		return c, nil
	}
	if err := c.pending.wait(); err != nil {
		return Checkpoint{}, err
	}
	c.pending.announced()
	c.pending = nil
	return c, nil
}

// settle waits for the harness's checkpoint in flight, if any, so that what is read next is
// durable. Neither s.mu nor the harness's lock may be held.
func (s *Store) settle(id string) {
	if v, ok := s.inflight.Load(id); ok {
		_ = v.(*pending).wait() // its error goes to the Checkpoint's Wait
	}
}

// settleAll is settle for every harness.
func (s *Store) settleAll() {
	s.inflight.Range(func(id, _ any) bool {
		s.settle(id.(string))
		return true
	})
}

// releasedRecord is a record released before its owner announced it (see Store.released).
type releasedRecord struct {
	seq uint64
	env []byte
}

// pending is a checkpoint whose batch is in the log, visible to readers, and whose fsync is
// under way: Pebble's commit pipeline makes it durable with, or before, any batch committed
// after it.
type pending struct {
	s  *Store
	h  *harness
	b  *pebble.Batch
	cp Checkpoint
	id string
	// firstEvent numbers the checkpoint's first event; 0 when it has none.
	firstEvent uint64
	done       bool
	err        error
}

// CommitError is a checkpoint the store could not commit, or whose fsync failed: the harness's
// chain in memory was dropped (the next use replays it from the store), and its last durable
// checkpoint stands.
type CommitError struct {
	ID  string
	Seq uint64
	Err error
}

func (e *CommitError) Error() string {
	return fmt.Sprintf("harness %s: checkpoint %d not committed: %v", e.ID, e.Seq, e.Err)
}

func (e *CommitError) Unwrap() error { return e.Err }

// announced notes that the checkpoint's owner has waited for it (and so announces it now, before
// it writes the next one): its record need not be kept should the next one release it.
func (p *pending) announced() {
	p.h.mu.Lock()
	if p.h.unannounced.seq == p.cp.Seq {
		p.h.unannounced = releasedRecord{}
	}
	p.h.mu.Unlock()
}

// wait is finishLocked for a caller that does not hold h.mu.
func (p *pending) wait() error {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	return p.finishLocked()
}

// finishLocked waits for the batch's fsync and acknowledges the checkpoint; it does so once,
// and returns the same each time. On failure it drops the harness from memory, as a commit
// that failed does. h.mu held.
func (p *pending) finishLocked() error {
	if p.done {
		return p.err
	}
	p.done = true
	if p.h.pending == p {
		p.h.pending = nil
	}
	err := p.b.SyncWait()
	p.b.Close()
	if p.s.inflight.CompareAndDelete(p.id, p) {
		p.s.inflightN.Add(-1)
	}
	if err != nil {
		p.s.commitFailed.Store(true)
		p.s.forgetLocked(p.id, p.h)
		p.err = &CommitError{ID: p.id, Seq: p.cp.Seq, Err: err}
		return p.err
	}
	p.s.acknowledge(p.id, p.cp.Seq)
	p.s.saveHeadsSoon()
	return nil
}

// StoreOptions configures OpenStore. Zero values take the defaults.
type StoreOptions struct {
	// Engine makes and replays chains (default: Load()).
	Engine bridge.Engine
	// Policy is the keyframe policy of new chains.
	Policy bridge.ChainPolicy
	// FS replaces the real file system (tests use Pebble's crashable in-memory FS); no
	// process lock is taken then.
	FS vfs.FS
	// ErrorLog receives Pebble's error messages (default: standard error).
	ErrorLog io.Writer
	// MinFree is the free space the store's disk must keep: a checkpoint that would leave less
	// is refused with ErrDiskFull before anything is written (default DefaultMinFree; only on
	// the real file system).
	MinFree int64
	// ReadOnly opens the store for reading: the process lock is taken as always, Pebble opens
	// read-only (it replays its write-ahead log into memory, and writes, flushes and deletes
	// nothing), and Close leaves the heads file as it is. Whatever would write fails with
	// ErrReadOnly. A store without a database yet is refused with ErrNoDatabase.
	ReadOnly bool
	// IdleRelease is how long the store goes without a checkpoint before it gives back the
	// compressors it keeps idle for the next harness (default DefaultIdleRelease).
	IdleRelease time.Duration
}

// ErrReadOnly is returned for a write to a store opened with ReadOnly.
var ErrReadOnly = errors.New("the store was opened read-only")

// ErrNoDatabase is returned by a ReadOnly open of a store that holds no database yet.
var ErrNoDatabase = errors.New("the store holds no database yet")

// DefaultMinFree is the space a checkpoint leaves free on the store's disk: room for Pebble to
// flush its memtable and write the log of the checkpoints that pause or stop a harness.
const DefaultMinFree = 16 << 20

// Store is the Pebble checkpoint store: one database per directory, one process at a time.
type Store struct {
	dir    string
	db     *pebble.DB
	engine bridge.Engine
	policy bridge.ChainPolicy
	lock   *os.File
	zdec   *zstd.Decoder
	// streamDecs holds stream decoders between reads (see streamReader).
	streamDecs chan *zstd.Decoder
	// streamEncs holds the delta stream encoders of harnesses that stopped, for the next
	// harness that starts a stream (see harness.compress).
	streamEncs chan *zstd.Encoder
	// keyframes compresses every harness's keyframes.
	keyframes keyframeEncoders

	mu        sync.Mutex
	harnesses map[string]*harness
	// deleting counts the deletions under way of each harness: it is not opened meanwhile, so
	// that no checkpoint commits between the heads file forgetting it and its keys going.
	deleting map[string]int

	fs       vfs.FS
	readOnly bool
	minFree  int64 // 0: no check (an in-memory file system)
	room     roomReading
	corrupt  *corruptionLog
	heads    map[string]uint64 // the heads file as read at open (see damage.go)
	headsErr error             // why the heads file could not be read
	damage   map[string]error  // harnesses found damaged at open, by id
	// acked are the heads acknowledged since open: id → *atomic.Uint64, raised by every
	// checkpoint without a store-wide lock (50 harnesses committing at once queued on one).
	acked sync.Map
	// commitFailed says a commit failed: the index may show what the log does not hold.
	commitFailed atomic.Bool
	// released is, per harness (id → releasedRecord), the record a keyframe released while the
	// checkpoint it held was still to be announced by its owner (Extras.NoSyncWait): its owner
	// makes it known after the keyframe is written, and StoredRecord returns it until the
	// harness's next checkpoint.
	released sync.Map
	// inflight is, per harness (id → *pending), its checkpoint whose fsync is under way
	// (Extras.NoSyncWait). The readers of a harness's state, index and records wait for it
	// (settle); its event log is read up to its first event (see Events). So nothing reads a
	// checkpoint before it is durable.
	inflight sync.Map
	// inflightN counts inflight's checkpoints. (A harness leaves the store's map only once its
	// checkpoint in flight is through, see forgetLocked, so none is stored over another.)
	inflightN atomic.Int64
	// The heads file's writers (see saveHeadsSoon): one at a time, in the background.
	headsMu   sync.Mutex
	headsLast atomic.Int64 // when it was last written (UnixNano)
	headsBusy atomic.Bool
	headsWG   sync.WaitGroup
	// The idle release of compressors (see idle.go): when the last checkpoint was written
	// (UnixNano), whether the timer is armed, and the timer.
	idleAfter  time.Duration
	lastWrite  atomic.Int64
	idleArmed  atomic.Bool
	idleMu     sync.Mutex
	idleTimer  *time.Timer
	idleClosed bool
}

// harness is the in-memory side of one harness's chain: the state encoder and the chain
// positioned at the durable head.
type harness struct {
	mu    sync.Mutex
	enc   statefmt.BinaryEncoder
	chain bridge.Chain
	index IndexEntry

	// The deltas' zstd stream (see compress): zw is nil until the first delta and after the
	// harness stops (releaseStream), which gives it to encs, the store's idle encoders;
	// streamOpen says whether the next delta continues it. Keyframes are compressed into
	// zscratch.
	encs       chan *zstd.Encoder
	zw         *zstd.Encoder
	zbuf       bytes.Buffer
	streamOpen bool
	zscratch   []byte

	nextEvent uint64 // the next event's number; 0 until read from the log

	// pending is the checkpoint whose fsync is under way (Extras.NoSyncWait): the next
	// checkpoint, and anything that lets the harness go, waits for it first.
	pending *pending
	// unannounced is the record of the last checkpoint written without waiting for its fsync
	// (Extras.NoSyncWait) that its owner has not waited for yet (Checkpoint.Wait): the owner
	// may hear of it only after its next checkpoint is written, even when a reader saw it
	// through to durable meanwhile (settle), so a keyframe that releases it keeps its record
	// for the owner's sinks (Store.released). Zero after a checkpoint that waited, and once
	// the owner waited.
	unannounced releasedRecord
	// heldReleased says the store's released map holds a record of this harness.
	heldReleased bool

	// restoreBuf is the replay's scratch, as large as the keyframe and already paged in: the
	// first Restore decodes the state into it; a Persist lets it go.
	restoreBuf []byte
	// closed says the harness was dropped from the store's map and its chain closed: whoever
	// waited for mu opens it again (see acquire).
	closed bool
}

func (h *harness) close() {
	h.chain.Close()
	h.releaseStream()
}

// compress returns the stored form of a record's payload. A keyframe is one zstd frame of its
// own, decoded straight into the restore buffer, and it ends the harness's stream; the deltas
// after it share one stream, flushed at each checkpoint, so each record's payload can refer to
// the earlier ones. A delta starts a new stream after a keyframe, a restart, or a checkpoint
// that stopped the harness (releaseStream).
func (h *harness) compress(keyframes *keyframeEncoders, payload []byte, keyframe bool) (statefmt.Compression, []byte, error) {
	h.zbuf.Reset()
	if keyframe {
		h.streamOpen = false
		return h.compressKeyframe(keyframes, payload)
	}
	comp := statefmt.CompressionZstdStream
	if !h.streamOpen {
		comp = statefmt.CompressionZstdStreamStart
		if h.zw == nil {
			// An encoder another harness stopped with: making one allocates and clears its
			// window and tables (megabytes), which cost a short harness (a sub-agent of a
			// step or two) more than all its checkpoints.
			select {
			case h.zw = <-h.encs:
			default:
				zw, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
					zstd.WithWindowSize(streamWindow), zstd.WithEncoderCRC(false))
				if err != nil {
					return 0, nil, err
				}
				h.zw = zw
			}
		}
		h.zw.Reset(&h.zbuf)
		h.streamOpen = true
	}
	if _, err := h.zw.Write(payload); err != nil {
		return 0, nil, err
	}
	if err := h.zw.Flush(); err != nil {
		return 0, nil, err
	}
	return comp, h.zbuf.Bytes(), nil
}

// releaseStream lets a harness that stopped (paused, failed, completed) give back its delta
// compressor, megabytes of window and tables that would otherwise stay for as long as the store
// holds the harness: a daemon keeps many harnesses that wait at gates all night. It goes to the
// store's idle encoders (up to one per CPU), for the next harness that starts a stream. The next
// delta of this one, if it ever comes, starts a new stream. h.mu held.
func (h *harness) releaseStream() {
	if h.zw != nil {
		select {
		case h.encs <- h.zw: // Reset by its next user: what this stream wrote is forgotten
		default:
			h.zw.Close()
		}
		h.zw = nil
	}
	h.streamOpen, h.zbuf, h.zscratch = false, bytes.Buffer{}, nil
}

// keyframeEncoders are the store's keyframe compressors, shared by its harnesses, at
// keyframeLevel. An encoder is made when a keyframe finds none idle, up to one per CPU: a
// harness alone uses one, and pages in its tables once. (One zstd.Encoder with a concurrency
// of GOMAXPROCS hands its calls to its workers in turn, so a single harness paged in every
// worker's tables: 1,300 more page faults in a 1,000-step run.) Harnesses that keyframe at
// once each get an encoder, and a keyframe of several frames compresses them on every CPU.
type keyframeEncoders struct {
	mu   sync.Mutex
	idle []*zstd.Encoder
	made int
	free *sync.Cond // signalled when an encoder goes back idle; made at first use
}

// encode compresses src as one zstd frame appended to dst.
func (k *keyframeEncoders) encode(src, dst []byte) ([]byte, error) {
	enc, err := k.get()
	if err != nil {
		return nil, err
	}
	defer k.put(enc)
	return enc.EncodeAll(src, dst), nil
}

func (k *keyframeEncoders) get() (*zstd.Encoder, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.free == nil {
		k.free = sync.NewCond(&k.mu)
	}
	for len(k.idle) == 0 && k.made >= runtime.GOMAXPROCS(0) {
		k.free.Wait()
	}
	if n := len(k.idle); n > 0 {
		enc := k.idle[n-1]
		k.idle = k.idle[:n-1]
		return enc, nil
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(keyframeLevel), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	k.made++
	return enc, nil
}

func (k *keyframeEncoders) put(enc *zstd.Encoder) {
	k.mu.Lock()
	k.idle = append(k.idle, enc)
	k.free.Signal()
	k.mu.Unlock()
}

// keyframeLevel is the keyframes' compression level. A keyframe is written in its step, and
// compressing the whole state is most of that step, the slowest there is: zstd.SpeedDefault
// took 2.0-2.6 times less than zstd.SpeedBetterCompression for 5 % more bytes on the
// reference state (7 % on the suite's real text), and keeps the step of a 1 MB state well
// under 50 ms on a loaded 2-CPU machine; a board's slower cores need the margin (see
// docs/store.md).
const keyframeLevel = zstd.SpeedDefault

// keyframeFrame is the largest raw size of one independent zstd frame of a keyframe, and
// keyframeFrameMin the smallest one it is cut into to use more cores: larger keyframes
// compress and decompress on every core. A frame finds its matches only within itself (see
// docs/store.md for what that costs).
const (
	keyframeFrame    = 8 << 20
	keyframeFrameMin = 4 << 20
)

// keyframeFrames is how many frames, of equal size, a keyframe of n raw bytes is cut into on
// cores CPUs: as few as keyframeFrame allows, and more, of keyframeFrameMin or more each, up
// to one per CPU. Equal frames finish together: a 10 MiB keyframe in 8 + 2 MiB waited for the
// 8 MiB frame, in 5 + 5 for half the state.
func keyframeFrames(n, cores int) int {
	frames := (n + keyframeFrame - 1) / keyframeFrame
	if more := min(cores, n/keyframeFrameMin); more > frames {
		frames = more
	}
	return max(frames, 1)
}

// compressKeyframe compresses a keyframe as one zstd frame, or as independent frames in
// parallel (CompressionZstdFrames) when keyframeFrames says so.
func (h *harness) compressKeyframe(keyframes *keyframeEncoders, payload []byte) (statefmt.Compression, []byte, error) {
	n := keyframeFrames(len(payload), runtime.GOMAXPROCS(0))
	if n == 1 {
		z, err := keyframes.encode(payload, h.zscratch[:0])
		if err != nil {
			return 0, nil, err
		}
		h.zscratch = z
		return statefmt.CompressionZstd, z, nil
	}
	cut := func(i int) int { return i * len(payload) / n }
	frames := make([][]byte, n)
	errs := make([]error, n)
	parallel(n, func(i int) {
		frames[i], errs[i] = keyframes.encode(payload[cut(i):cut(i+1)], nil)
	})
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	rawLens, zLens := make([]int, n), make([]int, n)
	for i, f := range frames {
		rawLens[i], zLens[i] = cut(i+1)-cut(i), len(f)
	}
	out := statefmt.AppendFrameTable(h.zscratch[:0], rawLens, zLens)
	for _, f := range frames {
		out = append(out, f...)
	}
	h.zscratch = out
	return statefmt.CompressionZstdFrames, out, nil
}

// parallel runs f(0..n-1) on up to GOMAXPROCS goroutines and waits for them all.
func parallel(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// yield lets the log's writer run after a commit that has the log to itself (a test counts it).
var yield = runtime.Gosched

// streamWindow bounds how far back a record's compression looks (and each open stream's memory).
const streamWindow = 1 << 20

// feeder hands a zstd stream decoder the payloads of successive records.
type feeder struct{ b []byte }

func (f *feeder) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// quietLogger keeps Pebble quiet at info level ("Found 0 WALs") and reports errors.
type quietLogger struct{ w io.Writer }

func (quietLogger) Infof(string, ...any) {}
func (l quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(l.w, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) { panic(fmt.Sprintf("pebble: "+format, args...)) }

// ErrStoreInUse is returned (wrapped, with the owner's pid) when another process has the store.
var ErrStoreInUse = errors.New("store in use")

// InUseError is the ErrStoreInUse of an open: the store's directory and the pid its lock file
// names ("unknown" when it names none), for a caller that says more about what to do.
type InUseError struct {
	Dir, PID string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("%v: %s is in use by pid %s (stop that process, or talk to it through its control socket)", ErrStoreInUse, e.Dir, e.PID)
}

func (e *InUseError) Unwrap() error { return ErrStoreInUse }

// ErrNotFound is returned for a harness the store does not hold.
var ErrNotFound = errors.New("harness not found")

// partNotFound is a part of a harness that the store does not hold (a named checkpoint, its
// task): its message says which, alone ("harness h has no checkpoint named \"x\""), without
// ErrNotFound's "harness not found", which would say the harness itself is missing; errors.Is
// finds ErrNotFound in it all the same (the API answers 404).
type partNotFound struct{ msg string }

func (e partNotFound) Error() string        { return e.msg }
func (e partNotFound) Is(target error) bool { return target == ErrNotFound }

// lockDir takes the process lock on dir/store.lock and writes our pid into it. The lock file is
// opened without following a symbolic link and must be ours (trust.CheckOwnFile) before it is
// truncated.
//
// A read-only open of a store on a read-only file system (a card the kernel remounted read-only
// after an I/O error, a backup mounted so) takes the lock on the lock file opened for reading:
// flock does not need a file open for writing, and nobody writes the pid there.
func lockDir(dir string, readOnly bool) (*os.File, error) {
	path := filepath.Join(dir, "store.lock")
	f, err := trust.OpenOwnFile(path, "the store's lock file", os.O_RDWR|os.O_CREATE, 0o600, false)
	switch {
	case readOnly && errors.Is(err, syscall.EROFS):
		f, err = trust.OpenOwnFile(path, "the store's lock file", os.O_RDONLY, 0, false)
	case errors.Is(err, syscall.EROFS):
		return nil, fmt.Errorf("the store %s is on a read-only file system: it can be read there (ls, show, events, verify; export --chain to move a harness to another store), not changed: %w", dir, err)
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := io.ReadAll(f)
		f.Close()
		pid := strings.TrimSpace(string(owner))
		if pid == "" {
			pid = "unknown"
		}
		return nil, &InUseError{Dir: dir, PID: pid}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// OpenStore opens the store in dir, creating the directory (mode 0700) when it does not exist.
// An existing directory must be one this user can trust (trust.CheckDir); its mode is never changed.
func OpenStore(dir string, o StoreOptions) (*Store, error) {
	s := &Store{dir: dir, engine: o.Engine, policy: o.Policy, harnesses: map[string]*harness{}, deleting: map[string]int{}, readOnly: o.ReadOnly}
	if o.FS == nil {
		s.minFree = cmp.Or(o.MinFree, DefaultMinFree)
	}
	if s.engine == nil {
		s.engine, _ = bridge.Load()
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
		if s.readOnly {
			fs = readOnlyFS{fs}
		}
		if err := trust.PrepareDir(dir); err != nil {
			return nil, err
		}
		lock, err := lockDir(dir, s.readOnly)
		if err != nil {
			return nil, err
		}
		s.lock = lock
		if fi, err := os.Lstat(filepath.Join(dir, "db")); err == nil && (!fi.IsDir() || trust.OwnerOf(fi) != uint32(os.Geteuid())) {
			s.unlock()
			return nil, trust.Untrusted("%s is not a directory of this user: the store keeps its database there; move it away", filepath.Join(dir, "db"))
		}
	}
	errLog := o.ErrorLog
	if errLog == nil {
		errLog = os.Stderr
	}
	if err := s.checkOpenRoom(); err != nil {
		s.unlock()
		return nil, fmt.Errorf("cannot open the store in %s: %w", dir, err)
	}
	db, err := s.openDB(fs, errLog)
	if err != nil {
		s.unlock()
		return nil, fmt.Errorf("cannot open the store in %s: %w", dir, err)
	}
	s.db = db
	s.checkHeads()
	s.zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(statefmt.MaxRawLen))
	s.streamDecs = make(chan *zstd.Decoder, runtime.GOMAXPROCS(0))
	s.streamEncs = make(chan *zstd.Encoder, runtime.GOMAXPROCS(0))
	s.idleAfter = cmp.Or(o.IdleRelease, DefaultIdleRelease)
	return s, nil
}

// ReadOnlyLogLimit is how many bytes of write-ahead log OpenToRead replays into memory at each
// read-only open: a writer's close leaves its last memtable's worth (megabytes after a long run)
// in the logs, and replaying 1 MiB costs a read about as much as the read-write open that
// recovers them into a table once, after which reads replay nothing.
const ReadOnlyLogLimit = 1 << 20

// NoStoreError is OpenToRead's refusal of Dir, which holds no store (Exists: Dir exists):
// nothing has been run with it, or the path is mistyped.
type NoStoreError struct {
	Dir    string
	Exists bool
}

func (e *NoStoreError) Error() string {
	what := "does not exist"
	if e.Exists {
		what = "holds no harness-edge store"
	}
	return fmt.Sprintf("%s %s: no task has been run with it (check --store or HARNESS_EDGE_STORE; `harness-edge run TASK` or `serve` makes a store)", e.Dir, what)
}

// OpenToRead opens the store in dir for reading only: read-only (ReadOnly) when its database
// exists and its write-ahead logs hold at most ReadOnlyLogLimit bytes; else as OpenStore opens
// it, which recovers the logs into a table so that the next reads have nothing to replay (and
// makes the database of a store whose creation was cut short).
//
// A directory that holds no store at all (no database, no heads file) is refused with a
// *NoStoreError, and nothing is made there: a reader given a mistyped path says so, rather than
// make an empty store and show it.
//
// On a read-only file system, or a disk too full to open the store to write (ErrDiskFull), it
// opens read-only whatever the logs hold: nothing can be recovered into a table there.
func OpenToRead(dir string) (*Store, error) {
	if !exists(filepath.Join(dir, "db")) && !exists(filepath.Join(dir, headsName)) {
		return nil, &NoStoreError{Dir: dir, Exists: exists(dir)}
	}
	if logBytes(filepath.Join(dir, "db")) <= ReadOnlyLogLimit {
		s, err := OpenStore(dir, StoreOptions{ReadOnly: true})
		if !errors.Is(err, ErrNoDatabase) {
			return s, err
		}
	}
	s, err := OpenStore(dir, StoreOptions{})
	if errors.Is(err, syscall.EROFS) || errors.Is(err, ErrDiskFull) {
		// A read-only file system, or a disk too full to write the log to a table: the log is
		// replayed into memory instead, every time.
		return OpenStore(dir, StoreOptions{ReadOnly: true})
	}
	return s, err
}

// readOnlyFS is the file system of a read-only open. Pebble takes its own lock on the database
// directory by creating a LOCK file even when it opens read-only; on a read-only file system,
// where that cannot be, the store's process lock (lockDir) is the only one, as it is for every
// other open of the store.
type readOnlyFS struct{ vfs.FS }

type noLock struct{}

func (noLock) Close() error { return nil }

func (f readOnlyFS) Lock(name string) (io.Closer, error) {
	l, err := f.FS.Lock(name)
	if errors.Is(err, syscall.EROFS) {
		return noLock{}, nil
	}
	return l, err
}

// logBytes adds up the sizes of Pebble's write-ahead logs in dbDir (0 when there are none).
func logBytes(dbDir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dbDir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
		}
	}
	return n
}

// openDB opens the Pebble database after checking that its files are whole enough not to be
// mistaken for a new database. Pebble's corruption reports are errors of the reads that meet
// them (corruptionLog), never a panic.
func (s *Store) openDB(fs vfs.FS, errLog io.Writer) (*pebble.DB, error) {
	s.fs, s.corrupt, s.damage = fs, &corruptionLog{w: errLog}, map[string]error{}
	dbDir := filepath.Join(s.dir, "db")
	s.heads, s.headsErr = readHeads(fs, s.headsPath())
	if err := checkDBFiles(fs, dbDir, len(s.heads) > 0 || s.headsErr != nil); err != nil {
		return nil, err
	}
	if len(s.heads) > 0 {
		if _, err := fs.Stat(dbDir); err != nil {
			return nil, fmt.Errorf("%s is missing, but the store held %d harnesses (its heads file says so): restore the database directory", dbDir, len(s.heads))
		}
	}
	if s.readOnly {
		if _, err := fs.Stat(dbDir); errors.Is(err, os.ErrNotExist) {
			return nil, ErrNoDatabase
		}
	}
	db, err := pebble.Open(dbDir, &pebble.Options{
		FS:                 fs,
		ReadOnly:           s.readOnly,
		Logger:             quietLogger{errLog},
		FormatMajorVersion: pebble.FormatNewest,
		EventListener:      &pebble.EventListener{DataCorruption: s.corrupt.note, BackgroundError: s.corrupt.background},
	})
	if s.readOnly && errors.Is(err, pebble.ErrDBDoesNotExist) {
		return nil, ErrNoDatabase
	}
	return db, err
}

func (s *Store) unlock() {
	if s.lock != nil {
		// Unlock before closing: a child forked meanwhile (a tool, an agent) shares the lock's
		// file description until it execs, and closing our descriptor alone would leave the store
		// locked for that moment.
		_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
		s.lock.Close()
		s.lock = nil
	}
}

// Close closes the database and releases the process lock.
func (s *Store) Close() error {
	s.stopIdle()
	s.mu.Lock()
	hs := s.harnesses
	s.harnesses = nil
	s.mu.Unlock()
	for _, h := range hs { // after s.mu: a Persist holding h.mu may take s.mu to forget h
		h.mu.Lock()
		h.drop()
		h.mu.Unlock()
	}
	s.zdec.Close()
	s.closeIdle() // every harness has let go of its own
	s.headsWG.Wait()
	var herr error
	if !s.readOnly {
		s.headsMu.Lock()
		herr = s.saveHeads(true)
		s.headsMu.Unlock()
	}
	err := s.db.Close()
	s.unlock()
	if err == nil && herr != nil {
		err = fmt.Errorf("store %s: cannot write its heads file: %w", s.dir, herr)
	}
	return err
}

// Dir is the store directory.
func (s *Store) Dir() string { return s.dir }

// Engine is the engine the store's chains use.
func (s *Store) Engine() bridge.Engine { return s.engine }

// IsAvailable reports whether a native engine (not the Go fallback) writes this store's chains.
func (s *Store) IsAvailable() bool { return s.engine.Backend() != bridge.BackendFallback }

// Index returns the harness's index entry (what `ls` shows), or an error wrapping ErrNotFound.
func (s *Store) Index(id string) (IndexEntry, error) {
	if err := ValidID(id); err != nil {
		return IndexEntry{}, err
	}
	s.settle(id)
	return s.readIndex(id)
}

func (s *Store) readIndex(id string) (IndexEntry, error) {
	if err := s.damageOf(id); err != nil {
		return IndexEntry{}, err
	}
	return s.indexEntry(id)
}

// indexEntry reads the index entry as stored, without looking at the damage found at open.
func (s *Store) indexEntry(id string) (IndexEntry, error) {
	var e IndexEntry
	v, closer, err := s.db.Get([]byte(prefixIndex + id))
	if errors.Is(err, pebble.ErrNotFound) {
		return e, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return e, damaged(id, "index entry", err)
	}
	defer closer.Close()
	if err := json.Unmarshal(v, &e); err != nil {
		return e, &DamageError{ID: id, What: "index entry", Err: err}
	}
	return e, nil
}

// CorruptError says which record of which harness failed, and the last sequence number that
// can still be restored (0 when none can).
type CorruptError struct {
	ID       string
	Seq      uint64
	LastGood uint64
	Reason   string
}

func (e *CorruptError) Error() string {
	if e.LastGood > 0 {
		return fmt.Sprintf("harness %s: record %d is corrupt: %s (the last good state is record %d: restore it with its sequence number)", e.ID, e.Seq, e.Reason, e.LastGood)
	}
	return fmt.Sprintf("harness %s: record %d is corrupt: %s (no earlier state is restorable)", e.ID, e.Seq, e.Reason)
}

// Is makes every CorruptError match ErrDamaged.
func (e *CorruptError) Is(target error) bool { return target == ErrDamaged }

// StoredRecord is one record as `inspect` shows it.
type StoredRecord struct {
	statefmt.Record
	StoredBytes int
}

// records calls f for each record of id from seq `from` to `to` (inclusive) in order, decoded and
// decompressed. It stops at the first error or when f returns false.
func (s *Store) records(id string, from, to uint64, scratch *[]byte, f func(r *statefmt.Record, raw []byte, stored int) (bool, error)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: chainKey(id, from), UpperBound: chainKey(id, to+1)})
	if err != nil {
		return err
	}
	defer it.Close()
	var stream streamReader
	defer stream.close()
	next := from
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		seq := binary.BigEndian.Uint64(k[len(k)-8:])
		next = seq + 1
		v, err := it.ValueAndErr()
		if err != nil {
			return &CorruptError{ID: id, Seq: seq, Reason: err.Error()}
		}
		rec, err := statefmt.DecodeRecord(v)
		if err != nil {
			return &CorruptError{ID: id, Seq: seq, Reason: err.Error()}
		}
		if rec.Seq != seq {
			return &CorruptError{ID: id, Seq: seq, Reason: fmt.Sprintf("stored under sequence %d but says %d", seq, rec.Seq)}
		}
		raw, err := s.decompress(rec, scratch, &stream)
		if err != nil {
			return &CorruptError{ID: id, Seq: seq, Reason: "payload does not decompress: " + err.Error()}
		}
		if uint64(len(raw)) != rec.RawLen {
			return &CorruptError{ID: id, Seq: seq, Reason: fmt.Sprintf("payload is %d bytes, the record says %d", len(raw), rec.RawLen)}
		}
		more, err := f(rec, raw, len(v))
		if err != nil || !more {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return &CorruptError{ID: id, Seq: next, Reason: errMsg(err)}
	}
	return nil
}

// streamReader decodes the zstd stream that records of one chain segment share. Its decoder
// comes from the store's and goes back there when the read is done: a new decoder allocates and
// clears its history (the stream's 1 MiB window and more) before the first byte, which made a
// report, a verify or the metrics of thousands of short harnesses spend more on that than on
// their replays, and grow the heap by a megabyte a harness between collections.
type streamReader struct {
	dec  *zstd.Decoder
	idle chan *zstd.Decoder // where dec goes back to
	feed feeder
	ok   bool // the stream so far decoded cleanly, so a continuation may follow
}

func (r *streamReader) close() {
	if r.dec == nil {
		return
	}
	_ = r.dec.Reset(nil) // lets go of the records it read
	select {
	case r.idle <- r.dec:
	default:
		r.dec.Close()
	}
	r.dec = nil
}

// decompress returns a record's raw payload. Stream records must come in order from the record
// that started their stream.
func (s *Store) decompress(rec *statefmt.Record, scratch *[]byte, stream *streamReader) ([]byte, error) {
	if rec.RawLen > statefmt.MaxRawLen {
		return nil, fmt.Errorf("declared size %d is too large", rec.RawLen)
	}
	switch rec.Compression {
	case statefmt.CompressionNone:
		return rec.Payload, nil
	case statefmt.CompressionZstd:
		out, err := s.zdec.DecodeAll(rec.Payload, room(*scratch, int(rec.RawLen)))
		if err == nil {
			*scratch = out
		}
		return out, err
	case statefmt.CompressionZstdFrames:
		frames, err := statefmt.Frames(rec.Payload, rec.RawLen)
		if err != nil {
			return nil, err
		}
		out := room(*scratch, int(rec.RawLen))[:rec.RawLen]
		errs := make([]error, len(frames))
		parallel(len(frames), func(i int) {
			f := frames[i]
			dst := out[f.RawOffset : f.RawOffset : f.RawOffset+f.RawLen]
			got, err := s.zdec.DecodeAll(f.Data, dst)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("frame %d: %w", i, err)
			case len(got) != f.RawLen || (f.RawLen > 0 && &got[0] != &out[f.RawOffset]):
				errs[i] = fmt.Errorf("frame %d decompresses to %d bytes, the table says %d", i, len(got), f.RawLen)
			}
		})
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		*scratch = out
		return out, nil
	case statefmt.CompressionZstdStreamStart:
		stream.feed.b = rec.Payload
		if stream.dec == nil {
			select {
			case stream.dec = <-s.streamDecs:
			default:
				dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(statefmt.MaxRawLen))
				if err != nil {
					return nil, err
				}
				stream.dec = dec
			}
			stream.idle = s.streamDecs
		}
		if err := stream.dec.Reset(&stream.feed); err != nil {
			return nil, err
		}
	case statefmt.CompressionZstdStream:
		if !stream.ok {
			return nil, errors.New("continues a compression stream whose start is missing or damaged")
		}
		stream.feed.b = rec.Payload
	default:
		return nil, fmt.Errorf("unknown compression %d", rec.Compression)
	}
	stream.ok = false
	*scratch = room(*scratch, int(rec.RawLen))[:rec.RawLen]
	if _, err := io.ReadFull(stream.dec, *scratch); err != nil {
		return nil, err
	}
	if len(stream.feed.b) != 0 {
		return nil, fmt.Errorf("%d compressed bytes left over", len(stream.feed.b))
	}
	stream.ok = true
	return *scratch, nil
}

func infoOf(r *statefmt.Record, stateLen uint64) bridge.RecordInfo {
	return bridge.RecordInfo{Kind: uint32(r.Kind), Seq: r.Seq, BaseSeq: r.BaseSeq, Prefix: r.Prefix,
		StateHash: r.StateHash, ChainHash: r.ChainHash, RawLen: r.RawLen, StateLen: stateLen}
}

// replay builds a chain positioned at record `to` (the head when to is 0) from the latest
// keyframe at or before it. On damage it returns a *CorruptError naming the last good record.
func (s *Store) replay(id string, idx IndexEntry, to uint64, scratch *[]byte) (bridge.Chain, error) {
	if to == 0 {
		to = idx.HeadSeq
	}
	if to > idx.HeadSeq {
		return nil, fmt.Errorf("harness %s has no record %d (head is %d)", id, to, idx.HeadSeq)
	}
	// Find the latest keyframe at or before `to` (retention keeps records from the newest
	// keyframe on, so this is usually idx.KeyframeSeq).
	from := idx.KeyframeSeq
	if to < from {
		from = 0
		err := s.records(id, 1, to, scratch, func(r *statefmt.Record, _ []byte, _ int) (bool, error) {
			if r.Kind == statefmt.KindKeyframe {
				from = r.Seq
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
		if from == 0 {
			return nil, fmt.Errorf("harness %s: record %d is no longer stored (records before keyframe %d were released)", id, to, idx.KeyframeSeq)
		}
	}
	c, err := s.engine.NewChain(s.policy)
	if err != nil {
		return nil, err
	}
	if to == idx.HeadSeq && idx.HeadStateBytes <= statefmt.MaxRawLen {
		// Room for the head state too: the first Restore decodes it into this buffer.
		*scratch = room(*scratch, int(idx.HeadStateBytes))
	}
	var lastGood uint64
	next := from
	err = s.records(id, from, to, scratch, func(r *statefmt.Record, raw []byte, _ int) (bool, error) {
		if r.Seq != next {
			return false, &CorruptError{ID: id, Seq: next, Reason: "record is missing"}
		}
		stateLen, err := stateLenOf(r, raw)
		if err != nil {
			return false, &CorruptError{ID: id, Seq: r.Seq, Reason: err.Error()}
		}
		if err := c.Push(infoOf(r, stateLen), raw); err != nil {
			return false, &CorruptError{ID: id, Seq: r.Seq, Reason: err.Error()}
		}
		lastGood, next = r.Seq, r.Seq+1
		return true, nil
	})
	if err == nil && lastGood != to {
		err = &CorruptError{ID: id, Seq: next, Reason: "record is missing"}
	}
	if err != nil {
		c.Close()
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.LastGood = lastGood
		}
		return nil, err
	}
	return c, nil
}

// stateLenOf recovers the rebuilt state's length, which the envelope does not repeat: a
// keyframe's payload is the state; a delta's header says its target length.
func stateLenOf(r *statefmt.Record, raw []byte) (uint64, error) {
	if r.Kind == statefmt.KindKeyframe {
		return uint64(len(raw)), nil
	}
	_, target, err := bridge.DeltaHeader(raw)
	if err != nil {
		return 0, err
	}
	return r.Prefix + target, nil
}

// keyframeDue reports whether the chain's next record will be a keyframe because the deltas
// since the last one reached the policy's bound. The encoder then starts over: a keyframe is
// what a finished harness keeps, and an encoder that went on for a thousand checkpoints holds
// every step's earlier versions, the text between them, which costs a tenth more compressed
// (see docs/store.md). The other keyframe trigger (delta bytes against the state's size) is
// left to the encoder's own start-over rule. h.mu held.
func (s *Store) keyframeDue(h *harness) bool {
	bound := uint64(s.policy.MaxReplay)
	if bound == 0 {
		bound = bridge.DefaultMaxReplay
	}
	head := h.chain.Head()
	return head.Seq > 0 && head.Seq-min(head.Seq, h.index.KeyframeSeq) >= bound
}

// BeingDeleted is the refusal of a harness whose deletion is under way (here, or in a daemon
// that reserved it): it wraps ErrNotFound, as the refusal of one already gone does.
func BeingDeleted(id string) error {
	return fmt.Errorf("harness %s is being deleted: %w", id, ErrNotFound)
}

// open returns the in-memory harness for id, replaying its chain from the store the first time.
// create says whether a harness the store does not hold may be started.
func (s *Store) open(id string, create bool) (*harness, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.harnesses == nil {
		return nil, errors.New("store is closed")
	}
	if s.deleting[id] > 0 {
		return nil, BeingDeleted(id)
	}
	if h, ok := s.harnesses[id]; ok {
		return h, nil
	}
	if err := s.damage[id]; err != nil {
		return nil, err
	}
	h := &harness{encs: s.streamEncs}
	idx, err := s.indexEntry(id)
	switch {
	case errors.Is(err, ErrNotFound) && create:
		if h.chain, err = s.engine.NewChain(s.policy); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		if h.chain, err = s.replay(id, idx, 0, &h.restoreBuf); err != nil {
			return nil, err
		}
		h.index = idx
	}
	s.harnesses[id] = h
	return h, nil
}

// lock returns the in-memory harness for id with its mu held, opening it (replaying its chain)
// when needed. A harness dropped while we waited for mu is opened again.
func (s *Store) acquire(id string, create bool) (*harness, error) {
	for {
		h, err := s.open(id, create)
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		if !h.closed {
			return h, nil
		}
		h.mu.Unlock()
	}
}

// forget drops the in-memory harness for id (the next use replays its chain from disk). It
// takes h.mu before taking h out of the map: until then, anyone who wants the harness gets
// this one and waits for a Persist in flight to commit, instead of replaying a chain from disk
// that lacks that checkpoint.
func (s *Store) forget(id string) {
	s.mu.Lock()
	h, ok := s.harnesses[id]
	s.mu.Unlock()
	if ok {
		h.mu.Lock()
		s.forgetLocked(id, h)
		h.mu.Unlock()
	}
}

// forgetLocked is forget for a caller that holds h.mu. A checkpoint in flight is seen through
// before h leaves the map, for the same reason: whoever wants the harness meanwhile waits for
// h, rather than replay from the log a checkpoint that is not durable yet (and write the next
// one over it).
func (s *Store) forgetLocked(id string, h *harness) {
	if p := h.pending; p != nil {
		_ = p.finishLocked() // its error goes to the Checkpoint's Wait
	}
	s.mu.Lock()
	if s.harnesses[id] == h {
		delete(s.harnesses, id)
	}
	s.mu.Unlock()
	h.drop()
	if h.heldReleased {
		s.released.Delete(id)
		h.heldReleased = false
	}
}

// drop waits for the harness's checkpoint in flight, closes its chain and marks it closed.
// h.mu held.
func (h *harness) drop() {
	if !h.closed {
		h.closed = true
		if p := h.pending; p != nil {
			_ = p.finishLocked() // its error goes to the Checkpoint's Wait
		}
		h.close()
	}
}

// Release drops what the store keeps in memory for a harness: its chain (the current state's
// bytes and the engine's buffers), its compressors and its restore buffer. The next use replays
// the chain from disk. A long-running owner releases the harnesses it is done with, so that its
// memory does not grow with every harness it has touched.
func (s *Store) Release(id string) { s.forget(id) }

// Persist makes state the harness's newest checkpoint: it encodes the state (incrementally),
// asks the chain for the next record, compresses it, and commits the record and the index entry
// in one batch with pebble.Sync. When the record is a keyframe, the same batch releases the
// records before it with one range deletion. When Persist returns nil the checkpoint is durable.
func (s *Store) Persist(state *statefmt.HarnessState) (Checkpoint, error) {
	return s.PersistWith(state, Extras{})
}

// Extras are written in a checkpoint's batch: durable together with it or not at all.
type Extras struct {
	// Events are appended to the harness's event log; Checkpoint.Events returns them numbered.
	Events []event.Event
	// Task, when set, replaces the harness's stored task definition (see Task).
	Task []byte
	// Checkpoint, when set, is the checkpoint's own event, logged after Events: the store
	// fills in the sequence number, kind and stored size, which are known only at commit.
	Checkpoint *event.Event
	// Steps, when Known, names the only plan steps that may differ from the state this
	// harness's previous checkpoint persisted, the same state object changed in place (see
	// statefmt.BinaryEncoder.EncodeChanged): a checkpoint of a long plan then compares those
	// steps only. The store takes the word only for the plan it encoded last.
	Steps statefmt.StepChanges
	// NoSyncWait returns once the batch is in the write-ahead log, before its fsync ends: the
	// checkpoint is durable when Checkpoint.Wait returns nil. The caller may work meanwhile
	// (the next step's reads), and must not let anything outside the process depend on the
	// checkpoint until then. The harness's next checkpoint may be prepared meanwhile: it is
	// written once this one is durable.
	NoSyncWait bool
}

// PersistWith is Persist that also writes extras in the same batch.
func (s *Store) PersistWith(state *statefmt.HarnessState, x Extras) (Checkpoint, error) {
	id := state.HarnessID
	if err := ValidID(id); err != nil {
		return Checkpoint{}, err
	}
	events := slices.Clone(x.Events)
	if x.Checkpoint != nil {
		events = append(events, *x.Checkpoint)
	}
	raw, err := event.EncodeLog(id, events)
	if err != nil {
		return Checkpoint{}, err
	}
	h, err := s.acquire(id, true)
	if err != nil {
		return Checkpoint{}, err
	}
	defer h.mu.Unlock()
	start := time.Now()
	h.restoreBuf = nil
	keyframe := s.keyframeDue(h)
	if keyframe {
		h.enc.Reset()
	}
	inc, err := h.enc.EncodeChanged(state, x.Steps)
	if err != nil {
		return Checkpoint{}, err
	}
	var info bridge.RecordInfo
	var payload []byte
	if keyframe {
		// Built here rather than by the chain, whose record would carry a copy of the state
		// (made by the engine, then copied into Go memory): megabytes, paged in twice.
		info, err = bridge.AppendKeyframe(h.chain, inc.Bytes)
		payload = inc.Bytes
	} else {
		info, payload, err = h.chain.Append(inc.Bytes, inc.Prefix, inc.Inserted)
	}
	if err != nil {
		s.forgetLocked(id, h)
		return Checkpoint{}, err
	}
	rec := statefmt.Record{Kind: statefmt.RecordKind(info.Kind), Seq: info.Seq, BaseSeq: info.BaseSeq, Prefix: info.Prefix,
		StateHash: info.StateHash, ChainHash: info.ChainHash, RawLen: info.RawLen, StateFormat: statefmt.BinaryFormatVersion,
		Compression: statefmt.CompressionNone, Payload: payload}
	if info.Kind == bridge.KindDelta {
		rec.DeltaFormat = bridge.DeltaFormatVersion
	}
	comp, z, err := h.compress(&s.keyframes, payload, info.Kind == bridge.KindKeyframe)
	if err != nil {
		s.forgetLocked(id, h)
		return Checkpoint{}, err
	}
	rec.Compression, rec.Payload = comp, z
	envelope := statefmt.EncodeRecord(nil, &rec)

	idx := h.index
	idx.ID, idx.AgentName, idx.TaskID, idx.Status = id, state.AgentName, state.TaskID, state.Status
	idx.ParentHarnessID, idx.CreatedAt, idx.UpdatedAt = state.ParentHarnessID, state.CreatedAt, state.UpdatedAt
	idx.HeadSeq, idx.HeadStateBytes, idx.LastCheckpointAt = info.Seq, uint64(len(inc.Bytes)), time.Now().UTC().Round(0)
	if info.Kind == bridge.KindKeyframe {
		idx.KeyframeSeq = info.Seq
	}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return Checkpoint{}, err
	}
	b := s.db.NewBatch()
	applied := false
	defer func() {
		if !applied {
			b.Close()
		}
	}()
	_ = b.Set(chainKey(id, info.Seq), envelope, nil)
	_ = b.Set([]byte(prefixIndex+id), idxJSON, nil)
	if info.Kind == bridge.KindKeyframe && info.Seq > 1 {
		_ = b.DeleteRange(chainKey(id, 0), chainKey(id, info.Seq), nil)
	}
	if x.Task != nil {
		_ = b.Set([]byte(prefixTask+id), x.Task, nil)
	}
	cp := Checkpoint{Seq: info.Seq, Kind: rec.Kind, StateBytes: len(inc.Bytes), RawBytes: len(payload), StoredBytes: len(envelope)}
	if x.Checkpoint != nil {
		last := &events[len(events)-1]
		last.Seq, last.Kind, last.StoredBytes = cp.Seq, cp.Kind.String(), cp.StoredBytes
		if raw[len(raw)-1], err = event.Encode(*last); err != nil {
			s.forgetLocked(id, h)
			return Checkpoint{}, err
		}
	}
	var firstEvent uint64
	if len(events) > 0 {
		if firstEvent, err = s.addEvents(b, id, h, raw); err != nil {
			s.forgetLocked(id, h)
			return Checkpoint{}, err
		}
	}
	cp.Prepare = time.Since(start)
	settling := state.Status == statefmt.StatusPaused || state.Status == statefmt.StatusFailed || state.Status == statefmt.StatusCompleted
	prev := h.pending
	if prev != nil { // this one was prepared while its fsync ran, and is written after it
		if err := prev.finishLocked(); err != nil {
			return Checkpoint{}, err
		}
	}
	if u := h.unannounced; u.seq != 0 && u.seq+1 == info.Seq && info.Kind == bridge.KindKeyframe {
		// Its owner hears of the previous checkpoint only now, and a sink may read its record
		// then (a replicator does), after this keyframe released it. Whether its fsync was
		// still under way (prev) or a reader had already waited for it does not matter. Kept
		// before the keyframe's batch is applied, so that a reader whose view holds the
		// keyframe finds it (StoredRecords); a failed commit forgets it with the harness.
		s.released.Store(id, u)
		h.heldReleased = true
	} else if h.heldReleased {
		s.released.Delete(id)
		h.heldReleased = false
	}
	if err := s.apply(b, settling); err != nil {
		// The chain moved on in memory but not on disk: replay from the store next time.
		s.forgetLocked(id, h)
		return Checkpoint{}, &CommitError{ID: id, Seq: info.Seq, Err: err}
	}
	applied = true
	h.index = idx
	if settling {
		h.releaseStream()
	}
	s.wrote()
	if len(events) > 0 {
		h.nextEvent = firstEvent + uint64(len(events))
	}
	for i := range events {
		events[i].N = firstEvent + uint64(i)
	}
	cp.Events = events
	p := &pending{s: s, h: h, b: b, cp: cp, id: id, firstEvent: firstEvent}
	h.unannounced = releasedRecord{}
	if x.NoSyncWait && !settling {
		h.pending, cp.pending, h.unannounced = p, p, releasedRecord{cp.Seq, envelope}
		s.inflight.Store(id, p)
		if s.inflightN.Add(1) == 1 {
			// The commit woke the log's writer and queued it to run next on this goroutine's
			// thread. Yielding lets it write and start the fsync now; otherwise it waits for
			// another thread to wake and take it, which on the 2-CPU build machine left 90 µs
			// between the commit and its fsync, all of it on the step's critical path. Not
			// when other harnesses' checkpoints are in flight too: then the writer is busy,
			// and the commits that queue meanwhile share its next fsync (group commit).
			yield()
		}
		return cp, nil
	}
	if err := p.finishLocked(); err != nil {
		return Checkpoint{}, err
	}
	return cp, nil
}

// Task returns the task definition stored with the harness (PersistWith's Extras.Task), or an
// error wrapping ErrNotFound.
func (s *Store) Task(id string) ([]byte, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	v, closer, err := s.db.Get([]byte(prefixTask + id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, partNotFound{fmt.Sprintf("harness %s has no stored task", id)}
	}
	if err != nil {
		return nil, damaged(id, "task", err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// Restore returns the harness's newest durable state, or an error wrapping ErrNotFound.
func (s *Store) Restore(id string) (*statefmt.HarnessState, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	h, err := s.acquire(id, false)
	if err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	if p := h.pending; p != nil { // the newest durable state, not one whose fsync is under way
		if err := p.finishLocked(); err != nil {
			return nil, err
		}
	}
	if h.index.HeadSeq == 0 {
		// Opened by AppendEvents or by a PersistWith that failed: no checkpoint yet.
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	buf := h.restoreBuf
	h.restoreBuf = nil
	return decodeHead(h.chain, buf)
}

// decodeHead decodes the chain's state, copied into buf's memory (which it then owns: a restore
// passes the buffer that held the decompressed keyframe, already paged in, and the decoded
// strings point into it).
func decodeHead(c bridge.Chain, buf []byte) (*statefmt.HarnessState, error) {
	return statefmt.DecodeBinaryOwned(c.State(buf[:0]))
}

// RestoreAt returns the harness's state as of record seq (which must still be stored: records
// before the newest keyframe are released). It leaves the harness's live chain alone.
func (s *Store) RestoreAt(id string, seq uint64) (*statefmt.HarnessState, error) {
	s.settle(id)
	idx, err := s.readIndex(id)
	if err != nil {
		return nil, err
	}
	return s.restoreWith(id, idx, seq)
}

// restoreWith restores checkpoint seq of harness id with the index entry idx.
func (s *Store) restoreWith(id string, idx IndexEntry, seq uint64) (*statefmt.HarnessState, error) {
	var scratch []byte
	c, err := s.replay(id, idx, seq, &scratch)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return decodeHead(c, scratch)
}

// Delete removes a harness: its records, index entry, events and task, in one synced batch
// (deleteBatch), without the compaction DeleteHarnesses makes. A harness found damaged can be
// deleted too.
func (s *Store) Delete(id string) error {
	if err := ValidID(id); err != nil {
		return err
	}
	if _, err := s.readIndex(id); err != nil && !errors.Is(err, ErrDamaged) {
		return err
	}
	return s.deleteBatch([]string{id}, id)
}

// beginDelete holds ids for their deletion: it waits for the checkpoints of theirs in flight,
// drops them from memory, and keeps them from being opened (read or checkpointed) until done is
// called. Otherwise a checkpoint could commit after the heads file forgot its harness and
// before the deletion's batch: its acknowledgement would outlive the harness, and the next
// open would report the deleted harness lost.
func (s *Store) beginDelete(ids []string) (done func()) {
	s.mu.Lock()
	for _, id := range ids {
		s.deleting[id]++
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.forget(id)
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, id := range ids {
			if s.deleting[id]--; s.deleting[id] <= 0 {
				delete(s.deleting, id)
			}
		}
	}
}

// List returns every harness's index entry, ordered by id. A harness found damaged (an
// acknowledged head the store lost, or an index entry that does not read) is listed with
// Damaged set; when a damaged table block hides index entries, the harnesses the heads file
// names are listed damaged in their place.
func (s *Store) List() ([]IndexEntry, error) {
	s.settleAll()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefixIndex), UpperBound: []byte("i0")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []IndexEntry
	seen := map[string]bool{}
	var scanErr error
	for ok := it.First(); ok; ok = it.Next() {
		id := string(it.Key()[len(prefixIndex):])
		seen[id] = true
		v, err := it.ValueAndErr()
		var e IndexEntry
		if err == nil {
			err = json.Unmarshal(v, &e)
		}
		if err != nil {
			out = append(out, IndexEntry{ID: id, Damaged: (&DamageError{ID: id, What: "index entry", Err: errors.New(errMsg(err))}).Error()})
			if _, ok := corruption(err); ok {
				scanErr = err
				break
			}
			continue
		}
		if derr := s.damageOf(id); derr != nil {
			e.Damaged = derr.Error()
		}
		out = append(out, e)
	}
	if scanErr == nil {
		scanErr = it.Error()
	}
	s.mu.Lock()
	for id, derr := range s.damage {
		if !seen[id] {
			seen[id] = true
			out = append(out, IndexEntry{ID: id, HeadSeq: s.heads[id], Damaged: derr.Error()})
		}
	}
	if scanErr != nil {
		for id, seq := range s.heads {
			if !seen[id] {
				seen[id] = true
				out = append(out, IndexEntry{ID: id, HeadSeq: seq, Damaged: (&DamageError{ID: id, What: "index entry", Err: errors.New(errMsg(scanErr))}).Error()})
			}
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b IndexEntry) int { return strings.Compare(a.ID, b.ID) })
	if scanErr != nil {
		if _, ok := corruption(scanErr); !ok {
			return out, scanErr
		}
	}
	return out, nil
}

// Inspect returns the stored records of a harness, oldest first.
func (s *Store) Inspect(id string) ([]StoredRecord, error) {
	s.settle(id)
	idx, err := s.readIndex(id)
	if err != nil {
		return nil, err
	}
	var out []StoredRecord
	var scratch []byte
	err = s.records(id, 0, idx.HeadSeq, &scratch, func(r *statefmt.Record, _ []byte, stored int) (bool, error) {
		rr := *r
		rr.Payload = nil
		out = append(out, StoredRecord{Record: rr, StoredBytes: stored})
		return true, nil
	})
	return out, err
}

// ChainBytes is what the harness's stored records take (their envelopes, as committed),
// read from the keys and values alone: nothing is decompressed or replayed, so a report of many
// long harnesses does not rebuild their chains to add up their sizes (Inspect does).
func (s *Store) ChainBytes(id string) (int, error) {
	if err := ValidID(id); err != nil {
		return 0, err
	}
	s.settle(id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: chainKey(id, 0), UpperBound: chainKey(id, 1<<64-1)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return n, damaged(id, "its records", err)
		}
		n += len(v)
	}
	return n, it.Error()
}

// firstSeq is the sequence number of the oldest stored record of id (0 when there is none),
// read from the key alone so that a damaged record is still counted.
func (s *Store) firstSeq(id string) (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: chainKey(id, 0), UpperBound: chainKey(id, 1<<64-1)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.First() {
		return 0, damaged(id, "its records", it.Error())
	}
	k := it.Key()
	return binary.BigEndian.Uint64(k[len(k)-8:]), nil
}

// Problem is one thing Verify found wrong.
type Problem struct {
	ID     string `json:"id"`
	Seq    uint64 `json:"seq,omitempty"`
	Reason string `json:"reason"`
}

// Verify reads everything the store holds for the harness (or for every harness when id is
// ""): it replays every stored record, checking envelopes, checksums, the delta chain and every
// hash, checks the index against the records, reads and decodes every event (numbered without
// gaps) and reads the task. For the whole store it also reads every key once (every table
// block's checksum) and reports what the heads file says was lost. It returns what it found
// wrong; an empty list means all is well.
func (s *Store) Verify(id string) ([]Problem, error) {
	if id == "" {
		s.settleAll()
	} else {
		s.settle(id)
	}
	var entries []IndexEntry
	var problems []Problem
	if id != "" {
		e, err := s.readIndex(id)
		if err != nil && !errors.Is(err, ErrDamaged) {
			return nil, err
		}
		if err != nil {
			e = IndexEntry{ID: id, Damaged: err.Error()}
		}
		entries = []IndexEntry{e}
	} else {
		all, err := s.List()
		if err != nil {
			return nil, err
		}
		entries = all
		if s.headsErr != nil {
			problems = append(problems, Problem{Reason: s.headsErr.Error()})
		}
	}
	for _, e := range entries {
		problems = append(problems, s.verifyHarness(e)...)
	}
	if id == "" {
		if p := s.scanAll(); p != nil && len(problems) == 0 {
			problems = append(problems, *p)
		}
	}
	return problems, nil
}

// verifyHarness checks one harness (see Verify).
func (s *Store) verifyHarness(e IndexEntry) []Problem {
	id := e.ID
	if e.Damaged != "" {
		return []Problem{{ID: id, Reason: e.Damaged}}
	}
	idx, err := s.readIndex(id)
	if err != nil {
		return []Problem{{ID: id, Reason: err.Error()}}
	}
	var problems []Problem
	if err := s.verifyEvents(id); err != nil {
		problems = append(problems, Problem{ID: id, Reason: err.Error()})
	}
	if _, err := s.Task(id); err != nil && !errors.Is(err, ErrNotFound) {
		problems = append(problems, Problem{ID: id, Reason: err.Error()})
	}
	first, err := s.firstSeq(id)
	if err != nil {
		return append(problems, Problem{ID: id, Reason: err.Error()})
	}
	if first != idx.KeyframeSeq {
		problems = append(problems, Problem{ID: id, Seq: first, Reason: fmt.Sprintf("first stored record is %d, the index says the chain starts at keyframe %d", first, idx.KeyframeSeq)})
	}
	var scratch []byte
	c, err := s.replay(id, idx, 0, &scratch)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return append(problems, Problem{ID: id, Seq: ce.Seq, Reason: ce.Error()})
		}
		return append(problems, Problem{ID: id, Reason: err.Error()})
	}
	defer c.Close()
	if _, err := statefmt.DecodeBinary(c.State(nil)); err != nil {
		problems = append(problems, Problem{ID: id, Seq: idx.HeadSeq, Reason: "head state does not decode: " + err.Error()})
	}
	return problems
}

// verifyEvents reads and decodes every event of the harness and checks their numbering.
func (s *Store) verifyEvents(id string) error {
	var prev uint64
	var gap error
	err := s.Events(id, 0, func(e event.Event) bool {
		if prev > 0 && e.N != prev+1 {
			gap = &DamageError{ID: id, What: "event log", Err: fmt.Errorf("event %d follows event %d", e.N, prev)}
			return false
		}
		prev = e.N
		return true
	})
	if err != nil {
		return err
	}
	return gap
}

// exists says whether path names anything (an error other than "does not exist" counts as
// something there, for the open to report).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, os.ErrNotExist)
}
