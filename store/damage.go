package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrDamaged matches (errors.Is) every error that says stored data is damaged: a record, an
// index entry, an event or a table block that fails its checksum, or an acknowledged checkpoint
// the store no longer holds.
var ErrDamaged = errors.New("store data is damaged")

// DamageError names the harness whose stored data is damaged and what is damaged.
type DamageError struct {
	ID   string // the harness, "" when the damage is not a harness's (the store's own files)
	What string // what is damaged, e.g. "index entry", "event 12", "checkpoint 7"
	Err  error  // the cause (Pebble's corruption error, with the file it names)
}

func (e *DamageError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("the store is damaged: %s: %v", e.What, e.Err)
	}
	return fmt.Sprintf("harness %s is damaged: %s: %v", e.ID, e.What, e.Err)
}

func (e *DamageError) Unwrap() error { return e.Err }

// Is makes every DamageError match ErrDamaged.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// corruption tells Pebble's corruption errors apart from other read errors and names the file.
func corruption(err error) (string, bool) {
	if err == nil || !pebble.IsCorruptionError(err) {
		return "", false
	}
	msg, _, _ := strings.Cut(err.Error(), "\n") // the rest is Pebble's detail carrier
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil && info.Path != "" {
		msg += " (in " + filepath.Join("db", filepath.Base(info.Path)) + ")"
	}
	return msg, true
}

// damaged turns a read error into a *DamageError naming id and what, when Pebble says the data
// is corrupt; other errors are returned as they are.
func damaged(id, what string, err error) error {
	if msg, ok := corruption(err); ok {
		return &DamageError{ID: id, What: what, Err: errors.New(msg)}
	}
	return err
}

// corruptionLog counts the corruptions Pebble met in this process (its DataCorruption event,
// which by default calls the logger's Fatalf: a panic in every command that read the block).
type corruptionLog struct {
	mu    sync.Mutex
	files []string
	seen  map[string]bool
	w     io.Writer
}

// background logs Pebble's background errors; a compaction that meets a damaged block is
// retried, and its error is logged once.
func (c *corruptionLog) background(err error) {
	msg, ok := corruption(err)
	if !ok {
		fmt.Fprintf(c.w, "pebble: background error: %v\n", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if !c.seen[msg] {
		c.seen[msg] = true
		fmt.Fprintf(c.w, "pebble: background error: %s\n", msg)
	}
}

func (c *corruptionLog) note(info pebble.DataCorruptionInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := filepath.Join("db", filepath.Base(info.Path))
	if !slices.Contains(c.files, f) {
		c.files = append(c.files, f)
		fmt.Fprintf(c.w, "pebble: %s is damaged (keys %s)\n", f, info.Bounds.String())
	}
}

// The heads file: each harness's acknowledged head sequence number, written (synced, renamed)
// when the store closes cleanly and when a harness is deleted or replaced, never per checkpoint.
// Sequence numbers only grow, so after a crash the file still holds lower bounds. At open, a
// harness whose index is missing or behind its recorded head lost acknowledged checkpoints:
// Pebble dropped them (a damaged write-ahead log ends recovery early; a lost manifest starts
// an empty database), and the store says so by name instead of serving an older state.
const (
	headsName  = "heads"
	headsMagic = "HEHEADS1\n"
)

// headsPath is the heads file beside the database.
func (s *Store) headsPath() string { return filepath.Join(s.dir, headsName) }

// readHeads reads the heads file; a missing file is an empty map (a new store or one from an
// earlier version); a damaged one is an error (the store opens, and verify reports it).
func readHeads(fs vfs.FS, path string) (map[string]uint64, error) {
	f, err := fs.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return map[string]uint64{}, nil
		}
		return map[string]uint64{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return map[string]uint64{}, err
	}
	bad := func(why string) (map[string]uint64, error) {
		return map[string]uint64{}, &DamageError{What: "the heads file " + headsName, Err: errors.New(why)}
	}
	if !bytes.HasPrefix(data, []byte(headsMagic)) || len(data) < len(headsMagic)+4 {
		return bad("it does not start with its magic or is too short")
	}
	body, sum := data[len(headsMagic):len(data)-4], data[len(data)-4:]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(sum) {
		return bad("its checksum does not match")
	}
	heads := map[string]uint64{}
	if err := json.Unmarshal(body, &heads); err != nil {
		return bad(err.Error())
	}
	return heads, nil
}

// writeHeads replaces the heads file: written to a temporary file, synced, renamed, and the
// directory synced.
func writeHeads(fs vfs.FS, dir string, heads map[string]uint64) error {
	body, err := json.Marshal(heads)
	if err != nil {
		return err
	}
	data := append([]byte(headsMagic), body...)
	data = binary.BigEndian.AppendUint32(data, crc32.Checksum(body, castagnoli))
	tmp := filepath.Join(dir, headsName+".tmp")
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, filepath.Join(dir, headsName)); err != nil {
		return err
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkDBFiles refuses a database directory whose files say a database was there but whose
// manifest marker (the empty file naming the current MANIFEST) is gone: Pebble would start an
// empty database over it and delete the old tables. A directory that holds nothing but Pebble's
// lock and its first MANIFEST is a creation cut short (a process killed while it made the
// store, before the marker): nothing was ever written there, and Pebble creates it again. It is
// refused all the same when the heads file says the store held harnesses, or cannot be read
// (held).
func checkDBFiles(fs vfs.FS, dbDir string, held bool) error {
	names, err := fs.List(dbDir)
	if err != nil {
		return nil // no database yet
	}
	var manifest, marker bool
	created := !held // only what an interrupted creation leaves
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "marker.manifest."):
			marker = true
		case strings.HasPrefix(n, "MANIFEST-"), strings.HasSuffix(n, ".sst"):
			manifest = true
			created = created && n == "MANIFEST-000001"
		case n != "LOCK":
			created = false
		}
	}
	if manifest && !marker && !created {
		return fmt.Errorf("%s: the manifest marker db/marker.manifest.* is missing (an empty file that names the current MANIFEST; some backup tools skip empty files), so the database cannot be opened without losing its tables: restore that file from the original store", dbDir)
	}
	return nil
}

// checkHeads compares the heads file with the index at open and marks every harness whose
// acknowledged head the store no longer holds. s.heads holds the file's map.
func (s *Store) checkHeads() {
	for id, seq := range s.heads {
		if ValidID(id) != nil {
			continue
		}
		idx, err := s.indexEntry(id)
		switch {
		case errors.Is(err, ErrNotFound):
			s.damage[id] = &DamageError{ID: id, What: fmt.Sprintf("checkpoint %d was acknowledged", seq),
				Err: errors.New("the store no longer holds this harness (Pebble dropped what its write-ahead log or manifest held)")}
		case err != nil:
			s.damage[id] = err
		case idx.HeadSeq < seq:
			s.damage[id] = &DamageError{ID: id, What: fmt.Sprintf("checkpoint %d was acknowledged", seq),
				Err: fmt.Errorf("the store's newest checkpoint is %d (Pebble dropped the later ones from its write-ahead log)", idx.HeadSeq)}
		}
	}
}

// damageOf returns the damage found at open for id, or nil. s.mu need not be held: the map is
// changed only under s.mu and read under it here.
func (s *Store) damageOf(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.damage[id]
}

// commit commits b synced. A failed commit may leave the batch applied in memory but not in
// the log, so the heads file is not rewritten from the index after it (see saveHeads).
// Pebble's fatal commit errors panic through here, and the flag is set then too. settling
// says whether the commit may use most of the disk reserve (see checkRoom).
func (s *Store) commit(b *pebble.Batch, settling bool) error {
	if err := s.apply(b, settling); err != nil {
		return err
	}
	if err := b.SyncWait(); err != nil {
		s.commitFailed.Store(true)
		return err
	}
	return nil
}

// apply is commit without the wait for the fsync: the batch is in the write-ahead log and
// visible when it returns, and b.SyncWait says when it is durable (the caller then closes b).
func (s *Store) apply(b *pebble.Batch, settling bool) (err error) {
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.checkRoom(int64(b.Len()), settling); err != nil {
		return err
	}
	done := false
	defer func() {
		if !done || err != nil {
			s.commitFailed.Store(true)
		}
	}()
	err = s.db.ApplyNoSyncWait(b, pebble.Sync)
	done = true
	return err
}

// saveHeads writes the heads file: the heads read at open (kept for harnesses found damaged,
// and lower bounds for the rest), raised by the checkpoints acknowledged since, and, with
// fromIndex (at Close, when nothing commits any more), by the index: that covers harnesses of a
// store written before the file existed. The index is not read while checkpoints commit: a
// batch can be visible there before its commit fails. headsMu must be held.
func (s *Store) saveHeads(fromIndex bool) error {
	if s.readOnly {
		return ErrReadOnly
	}
	heads := map[string]uint64{}
	s.mu.Lock()
	for id, seq := range s.heads {
		heads[id] = seq
	}
	s.mu.Unlock()
	s.acked.Range(func(id, seq any) bool {
		heads[id.(string)] = max(heads[id.(string)], seq.(*atomic.Uint64).Load())
		return true
	})
	if fromIndex && !s.commitFailed.Load() {
		list, _ := s.List()
		for _, e := range list {
			if e.Damaged == "" {
				heads[e.ID] = max(heads[e.ID], e.HeadSeq)
			}
		}
	}
	return writeHeads(s.fs, s.dir, heads)
}

// acknowledge records that the harness's checkpoint seq is durable.
func (s *Store) acknowledge(id string, seq uint64) {
	v, ok := s.acked.Load(id)
	if !ok {
		v, _ = s.acked.LoadOrStore(id, new(atomic.Uint64))
	}
	acked := v.(*atomic.Uint64)
	for cur := acked.Load(); seq > cur && !acked.CompareAndSwap(cur, seq); cur = acked.Load() {
	}
}

// headsEvery is how often, at most, a checkpoint also has the heads file rewritten, in the
// background: after a crash, only the checkpoints of the last headsEvery are not covered.
var headsEvery = 10 * time.Second

// saveHeadsSoon rewrites the heads file in the background when it is older than headsEvery and
// no write is under way. The checkpoint that calls it does not wait for it.
func (s *Store) saveHeadsSoon() {
	if time.Now().UnixNano()-s.headsLast.Load() < int64(headsEvery) || !s.headsBusy.CompareAndSwap(false, true) {
		return
	}
	s.headsLast.Store(time.Now().UnixNano())
	s.headsWG.Add(1)
	go func() {
		defer s.headsWG.Done()
		defer s.headsBusy.Store(false)
		s.headsMu.Lock()
		defer s.headsMu.Unlock()
		_ = s.saveHeads(false) // the next one, or Close, tries again
	}()
}

// forgetHeads drops ids from the heads (they were deleted or replaced) and rewrites the file,
// so a crash before the next clean close does not report them lost.
// The heads in now (an import's) are acknowledged in the same write.
func (s *Store) forgetHeads(ids []string, now map[string]uint64) error {
	s.mu.Lock()
	for _, id := range ids {
		delete(s.heads, id)
		s.acked.Delete(id)
		delete(s.damage, id)
	}
	for id, seq := range now {
		v := new(atomic.Uint64)
		v.Store(seq)
		s.acked.Store(id, v)
	}
	s.mu.Unlock()
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	return s.saveHeads(false)
}

// scanAll reads every key and value in the database once (each table block and its checksum,
// including keys no harness's index names) and returns the damage it meets, naming the harness
// whose keys it read last. The per-harness checks of Verify name the damaged harnesses exactly.
func (s *Store) scanAll() *Problem {
	it, err := s.db.NewIter(&pebble.IterOptions{})
	if err != nil {
		return &Problem{Reason: err.Error()}
	}
	defer it.Close()
	var last []byte
	for ok := it.First(); ok; ok = it.Next() {
		if _, err = it.ValueAndErr(); err != nil {
			break
		}
		last = append(last[:0], it.Key()...)
	}
	if err == nil {
		err = it.Error()
	}
	if err == nil {
		return nil
	}
	what := "a table block"
	if id, w := describeKey(last); id != "" {
		what = fmt.Sprintf("a table block after harness %s's %s", id, w)
	}
	return &Problem{Reason: (&DamageError{What: what, Err: errors.New(errMsg(err))}).Error()}
}

func errMsg(err error) string {
	if msg, ok := corruption(err); ok {
		return msg
	}
	return err.Error()
}

// describeKey names the harness and the kind of data of a key.
func describeKey(k []byte) (id, what string) {
	if len(k) < 3 || k[1] != '/' {
		return "", ""
	}
	rest := string(k[2:])
	switch string(k[:2]) {
	case prefixIndex:
		return rest, "index entry"
	case prefixTask:
		return rest, "task"
	case prefixNamed:
		if id, name, ok := strings.Cut(rest, "/"); ok {
			return id, "checkpoint named " + name
		}
	case prefixChain, prefixEvents:
		if len(rest) > 9 && rest[len(rest)-9] == '/' {
			id = rest[:len(rest)-9]
			n := binary.BigEndian.Uint64(k[len(k)-8:])
			if k[0] == 'c' {
				return id, fmt.Sprintf("checkpoint %d", n)
			}
			return id, fmt.Sprintf("event %d", n)
		}
	}
	return "", ""
}
