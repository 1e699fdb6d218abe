package store

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// The transfer format moves a harness, with everything it needs to go on, to another store:
// its family (the harness and, recursively, every sub-agent its state lists), and for each
// member the index entry, the task, the chain records as stored and the event log. Every part
// is checksummed, the header too, and a digest of the whole file closes it, so a flipped bit
// anywhere or a missing tail is refused before anything is written.
//
//	file    = magic header member* end
//	magic   = "HECHAIN2\n"
//	section = tag(1 byte) uvarint(len) body crc32c(tag, uvarint(len), body)(4 bytes, big endian)
//	header  = section 'H', body: JSON ExportHeader (format, root, members in file order with
//	          their record and event counts and whether a task follows)
//	member  = section 'I' (index entry JSON, as stored)
//	          [section 'T' (task, as stored)]
//	          section 'R' * records (record envelope, as stored, oldest first)
//	          section 'E' * events  (uvarint(event number) then the event JSON, as stored)
//	          section 'N' * named checkpoints (uvarint(name length), name, the value as stored)
//	end     = section 'Z', body: SHA-256 of every byte before this section
//
// Format 1 ("HECHAIN1\n": an unchecked index entry and one harness's records, without its task,
// events or sub-agents) is refused: a harness imported from it cannot go on.
const (
	exportMagic   = "HECHAIN2\n"
	exportV1Magic = "HECHAIN1\n"
	exportFormat  = 2
)

// Section tags.
const (
	secHeader = 'H'
	secIndex  = 'I'
	secTask   = 'T'
	secRecord = 'R'
	secEvent  = 'E'
	secNamed  = 'N'
	secEnd    = 'Z'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxEventNumber bounds the numbers of imported events. A store numbers a harness's events from
// 1 up, one by one, and reads them below 2^64-1; an imported log numbered near the top would be
// partly unreadable, and the numbers of its next events would wrap around to 0 and overwrite
// its first ones. At a million events a second a log takes nine years to reach this.
const maxEventNumber = 1 << 48

// maxFamily bounds how many harnesses one export carries (a damaged or cyclic sub-agent list
// ends there instead of running away).
const maxFamily = 10_000

// ExportHeader is the header of an export: what follows, in order.
type ExportHeader struct {
	Format  int            `json:"format"`
	Root    string         `json:"root"`
	Members []ExportMember `json:"members"`
}

// ExportMember is one harness of an exported family.
type ExportMember struct {
	ID      string `json:"id"`
	Task    bool   `json:"task"`
	Records int    `json:"records"`
	Events  int    `json:"events"`
	// Named counts the named checkpoints that follow the events (absent: none, as in the
	// exports of earlier versions).
	Named int `json:"named,omitempty"`
}

// TransferSummary says what an export or an import carried.
type TransferSummary struct {
	Root      string
	Harnesses []string // the family, root first
	Records   int
	Events    int
	// Named are the named checkpoints carried, as HARNESS/NAME.
	Named []string
	// Replaced are the harnesses an import with replace removed (the old family and any
	// member the store already held).
	Replaced []string
}

// TransferError says which part of an export is damaged.
type TransferError struct {
	What   string // "the header", "record 7 of harness quick", ...
	Offset int    // where that part starts in the file
	Reason string
}

func (e *TransferError) Error() string {
	return fmt.Sprintf("export is damaged: %s (at byte %d): %s; nothing was imported", e.What, e.Offset, e.Reason)
}

// IsExport reports whether data starts with the magic of a harness-edge export (any format).
func IsExport(data []byte) bool {
	return bytes.HasPrefix(data, []byte(exportMagic)) || bytes.HasPrefix(data, []byte(exportV1Magic))
}

// member is one harness of a family, as stored.
type member struct {
	id        string
	index     IndexEntry
	indexJSON []byte
	task      []byte // nil: the harness has no stored task
	records   [][]byte
	events    []storedEvent
	named     []storedNamed
	state     *statefmt.HarnessState // the head state, decoded
}

// storedNamed is a named checkpoint as stored (see named.go).
type storedNamed struct {
	name  string
	value []byte
}

type storedEvent struct {
	n    uint64
	data []byte
}

// Export writes the harness id and its family (every sub-agent its state lists, recursively),
// as stored, to w: index entries, tasks, chain records and event logs, each part checksummed.
// Everything is read from one snapshot of the store and verified (the chains replay) before
// the first byte is written. A sub-agent is refused: its family is exported with its parent.
func (s *Store) Export(id string, w io.Writer) (TransferSummary, error) {
	var sum TransferSummary
	if err := ValidID(id); err != nil {
		return sum, err
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	var family []*member
	seen := map[string]bool{id: true}
	type next struct{ id, listedBy string }
	for queue := []next{{id, ""}}; len(queue) > 0; queue = queue[1:] {
		m, err := s.readMember(snap, queue[0].id)
		if err != nil {
			if queue[0].listedBy != "" && errors.Is(err, ErrNotFound) {
				return sum, fmt.Errorf("harness %s lists sub-agent %s, which the store does not hold: %w", queue[0].listedBy, queue[0].id, err)
			}
			return sum, err
		}
		if len(family) == 0 && m.index.ParentHarnessID != "" {
			return sum, fmt.Errorf("harness %s is a sub-agent of %s: export %s (its sub-agents go with it)", id, m.index.ParentHarnessID, m.index.ParentHarnessID)
		}
		if err := s.verifyMember(m); err != nil {
			return sum, fmt.Errorf("harness %s does not verify in this store, so it is not exported: %w", m.id, err)
		}
		family = append(family, m)
		for _, c := range m.state.SubAgentIDs {
			if !seen[c] {
				seen[c] = true
				queue = append(queue, next{c, m.id})
			}
		}
		if len(seen) > maxFamily {
			return sum, fmt.Errorf("harness %s has more than %d harnesses in its family", id, maxFamily)
		}
	}
	if err := checkFamily(id, family); err != nil {
		return sum, err
	}
	hdr := ExportHeader{Format: exportFormat, Root: id}
	for _, m := range family {
		hdr.Members = append(hdr.Members, ExportMember{ID: m.id, Task: m.task != nil, Records: len(m.records), Events: len(m.events), Named: len(m.named)})
		sum.Harnesses = append(sum.Harnesses, m.id)
		for _, n := range m.named {
			sum.Named = append(sum.Named, m.id+"/"+n.name)
		}
		sum.Records += len(m.records)
		sum.Events += len(m.events)
	}
	sum.Root = id
	hdrJSON, err := json.Marshal(hdr)
	if err != nil {
		return sum, err
	}
	digest := sha256.New()
	bw := bufio.NewWriter(io.MultiWriter(w, digest))
	bw.WriteString(exportMagic)
	var scratch []byte
	section := func(tag byte, parts ...[]byte) {
		scratch = appendSection(scratch[:0], tag, parts...)
		bw.Write(scratch)
	}
	section(secHeader, hdrJSON)
	for _, m := range family {
		section(secIndex, m.indexJSON)
		if m.task != nil {
			section(secTask, m.task)
		}
		for _, r := range m.records {
			section(secRecord, r)
		}
		for _, e := range m.events {
			section(secEvent, binary.AppendUvarint(nil, e.n), e.data)
		}
		for _, n := range m.named {
			section(secNamed, binary.AppendUvarint(nil, uint64(len(n.name))), []byte(n.name), n.value)
		}
	}
	if err := bw.Flush(); err != nil {
		return sum, err
	}
	scratch = appendSection(scratch[:0], secEnd, digest.Sum(nil))
	_, err = w.Write(scratch)
	return sum, err
}

// appendSection appends one section (tag, length, body made of parts, CRC-32C) to dst.
func appendSection(dst []byte, tag byte, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	start := len(dst)
	dst = append(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// readMember reads one harness as stored: index entry, task, records and events.
func (s *Store) readMember(r pebble.Reader, id string) (*member, error) {
	m := &member{id: id}
	v, closer, err := r.Get([]byte(prefixIndex + id))
	if errors.Is(err, pebble.ErrNotFound) {
		return m, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return m, err
	}
	m.indexJSON = bytes.Clone(v)
	closer.Close()
	if err := json.Unmarshal(m.indexJSON, &m.index); err != nil {
		return m, fmt.Errorf("harness %s: index entry is corrupt: %w", id, err)
	}
	if v, closer, err := r.Get([]byte(prefixTask + id)); err == nil {
		m.task = bytes.Clone(v)
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return m, err
	}
	err = scan(r, chainKey(id, 0), chainKey(id, 1<<64-1), func(_ uint64, v []byte) {
		m.records = append(m.records, bytes.Clone(v))
	})
	if err != nil {
		return m, fmt.Errorf("harness %s: %w", id, err)
	}
	err = scan(r, eventKey(id, 0), eventKey(id, 1<<64-1), func(n uint64, v []byte) {
		m.events = append(m.events, storedEvent{n, bytes.Clone(v)})
	})
	if err != nil {
		return m, fmt.Errorf("harness %s: %w", id, err)
	}
	lo := []byte(prefixNamed + id + "/")
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte(prefixNamed + id + "0")})
	if err != nil {
		return m, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return m, damaged(id, "checkpoint named "+string(it.Key()[len(lo):]), err)
		}
		m.named = append(m.named, storedNamed{string(it.Key()[len(lo):]), bytes.Clone(v)})
	}
	if err := it.Error(); err != nil {
		return m, fmt.Errorf("harness %s: %w", id, err)
	}
	return m, nil
}

// scan calls f with the trailing big-endian number of each key in [lo, hi) and its value.
func scan(r pebble.Reader, lo, hi []byte, f func(n uint64, v []byte)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		f(binary.BigEndian.Uint64(k[len(k)-8:]), v)
	}
	return it.Error()
}

// verifyMember replays a member's records (every hash and link, as a restore does), decodes its
// head state and checks that the index entry and the events agree with them. It sets m.state.
func (s *Store) verifyMember(m *member) error {
	idx := &m.index
	if err := ValidID(m.id); err != nil {
		return err
	}
	if idx.ID != m.id {
		return fmt.Errorf("its index entry names harness %q", idx.ID)
	}
	if idx.Damaged != "" {
		// A store says a harness is damaged when it reads it; it never writes that down.
		return fmt.Errorf("its index entry says it is damaged (%q), which no store writes there", idx.Damaged)
	}
	if len(m.records) == 0 {
		return errors.New("it has no records")
	}
	c, err := s.engine.NewChain(s.policy)
	if err != nil {
		return err
	}
	defer c.Close()
	var scratch []byte
	var stream streamReader
	defer stream.close()
	next := idx.KeyframeSeq
	for i, env := range m.records {
		rec, err := statefmt.DecodeRecord(env)
		if err != nil {
			return fmt.Errorf("record %d of %d: %w", i+1, len(m.records), err)
		}
		switch {
		case rec.Seq != next:
			return fmt.Errorf("record %d is where record %d belongs (the chain starts at keyframe %d)", rec.Seq, next, idx.KeyframeSeq)
		case i == 0 && rec.Kind != statefmt.KindKeyframe:
			return fmt.Errorf("record %d starts the chain but is not a keyframe", rec.Seq)
		case i > 0 && rec.Kind == statefmt.KindKeyframe:
			return fmt.Errorf("record %d is a keyframe after keyframe %d (the index says the chain starts at %d)", rec.Seq, idx.KeyframeSeq, idx.KeyframeSeq)
		}
		raw, err := s.decompress(rec, &scratch, &stream)
		if err == nil && uint64(len(raw)) != rec.RawLen {
			err = fmt.Errorf("payload is %d bytes, the record says %d", len(raw), rec.RawLen)
		}
		if err != nil {
			return fmt.Errorf("record %d: %w", rec.Seq, err)
		}
		stateLen, err := stateLenOf(rec, raw)
		if err == nil {
			err = c.Push(infoOf(rec, stateLen), raw)
		}
		if err != nil {
			return fmt.Errorf("record %d does not verify: %w", rec.Seq, err)
		}
		next++
	}
	if head := c.Head(); head.Seq != idx.HeadSeq {
		return fmt.Errorf("records end at %d, the index says %d", head.Seq, idx.HeadSeq)
	}
	raw := c.State(nil)
	if idx.HeadStateBytes != 0 && uint64(len(raw)) != idx.HeadStateBytes {
		return fmt.Errorf("head state is %d bytes, the index says %d", len(raw), idx.HeadStateBytes)
	}
	st, err := statefmt.DecodeBinary(raw)
	if err != nil {
		return fmt.Errorf("head state: %w", err)
	}
	switch {
	case st.HarnessID != m.id:
		return fmt.Errorf("head state is of harness %q", st.HarnessID)
	case st.Status != idx.Status || st.ParentHarnessID != idx.ParentHarnessID || st.TaskID != idx.TaskID || st.AgentName != idx.AgentName:
		return fmt.Errorf("index entry (status %s, parent %q, task %q, agent %q) disagrees with the head state (status %s, parent %q, task %q, agent %q)",
			idx.Status, idx.ParentHarnessID, idx.TaskID, idx.AgentName, st.Status, st.ParentHarnessID, st.TaskID, st.AgentName)
	}
	m.state = st
	var prev uint64
	for _, e := range m.events {
		switch {
		case e.n == 0 || e.n > maxEventNumber:
			return fmt.Errorf("event %d is numbered outside the 1 to %d a log's events are numbered", e.n, uint64(maxEventNumber))
		case prev > 0 && e.n != prev+1:
			return fmt.Errorf("event %d follows event %d (a log's events are numbered without a gap)", e.n, prev)
		}
		prev = e.n
		ev, err := event.Decode(m.id, e.n, e.data)
		if err != nil {
			return err
		}
		if ev.HarnessID != m.id {
			return fmt.Errorf("event %d belongs to harness %q", e.n, ev.HarnessID)
		}
	}
	for i, n := range m.named {
		if err := ValidName(n.name); err != nil {
			return fmt.Errorf("named checkpoint %d: %w", i+1, err)
		}
		if i > 0 && n.name <= m.named[i-1].name {
			return fmt.Errorf("named checkpoint %q follows %q (names are in order, each once)", n.name, m.named[i-1].name)
		}
		p, nst, task, err := s.decodeNamed(m.id, n.name, n.value)
		if err != nil {
			return err
		}
		switch {
		case nst.HarnessID != m.id:
			return fmt.Errorf("the checkpoint named %s is a state of harness %q", n.name, nst.HarnessID)
		case p.Seq > idx.HeadSeq:
			return fmt.Errorf("the checkpoint named %s is checkpoint %d, after the head %d", n.name, p.Seq, idx.HeadSeq)
		case len(task) > 0 && !json.Valid(task):
			return fmt.Errorf("the checkpoint named %s keeps a task that is not JSON", n.name)
		}
	}
	return nil
}

// checkFamily checks that a family hangs together: the root is no sub-agent, every sub-agent a
// state lists is a member whose parent is that state's harness, and every other member is
// listed by its parent.
func checkFamily(root string, family []*member) error {
	byID := map[string]*member{}
	for _, m := range family {
		if byID[m.id] != nil {
			return fmt.Errorf("harness %s appears twice", m.id)
		}
		byID[m.id] = m
	}
	if r := byID[root]; r == nil || r != family[0] {
		return fmt.Errorf("the family's root %s is not its first harness", root)
	} else if r.state.ParentHarnessID != "" {
		return fmt.Errorf("harness %s is a sub-agent of %s, not the root of a family", root, r.state.ParentHarnessID)
	}
	listed := map[string]bool{root: true}
	for _, m := range family {
		for _, c := range m.state.SubAgentIDs {
			cm := byID[c]
			if cm == nil {
				return fmt.Errorf("harness %s lists sub-agent %s, which is missing", m.id, c)
			}
			if cm.state.ParentHarnessID != m.id {
				return fmt.Errorf("harness %s lists sub-agent %s, whose parent is %q", m.id, c, cm.state.ParentHarnessID)
			}
			listed[c] = true
		}
	}
	for _, m := range family {
		if !listed[m.id] {
			return fmt.Errorf("harness %s is not a sub-agent of any harness in the family", m.id)
		}
	}
	return nil
}

// ErrExists is returned by imports of a harness the store already holds (without replace).
var ErrExists = errors.New("harness already exists")

// ImportOptions configures Import.
type ImportOptions struct {
	// Replace lets the import replace harnesses the store holds: the family of the export's
	// root (every harness whose parent chain leads to it) and any member already there, each
	// with its records, events and task.
	Replace bool
	// CheckTask, when set, checks each stored task (the runtime parses it); the store only
	// checks that a task is a JSON object.
	CheckTask func(id string, task []byte) error
	// DryRun checks everything an import checks and writes nothing.
	DryRun bool
}

// Import reads an export (see Export), checks every checksum, replays every chain and checks
// every task and event, and then writes the whole family in one synced batch: either all of it
// is in the store afterwards or nothing changed. It refuses a harness the store already holds
// unless o.Replace is set; with it, the old family goes in the same batch, event logs included.
// The store must not be running any harness of the family meanwhile.
func (s *Store) Import(data []byte, o ImportOptions) (TransferSummary, error) {
	hdr, family, err := parseExport(data)
	if err != nil {
		return TransferSummary{}, err
	}
	return s.importFamily(hdr.Root, family, o, "export")
}

// Replica is one harness as a replica elsewhere holds it (a fleet's hub): its index entry as
// stored (JSON), its task, its records from the entry's keyframe to its head and its events,
// each exactly as the store that made them stored them.
type Replica struct {
	IndexJSON []byte
	Task      []byte // nil: no task
	Records   [][]byte
	Events    []ReplicaEvent
}

// ReplicaEvent is one stored event of a Replica and its number.
type ReplicaEvent struct {
	N    uint64
	Data []byte
}

// ImportReplica imports one harness (one without sub-agents, and no sub-agent) from a replica;
// see ImportReplicas.
func (s *Store) ImportReplica(r Replica, o ImportOptions) (TransferSummary, error) {
	return s.ImportReplicas([]Replica{r}, o)
}

// ImportReplicas imports a family from replicas the way Import imports an export: the root
// first, then every sub-agent of the family (ReplicaFamily gathers them), each with every
// record replayed and every hash and link checked, its task and every event checked, the
// family checked as Import checks it, then everything written in one synced batch, or
// nothing. A harness the store holds is refused (ErrExists) unless o.Replace is set. With
// o.DryRun it checks all that and writes nothing.
func (s *Store) ImportReplicas(rs []Replica, o ImportOptions) (TransferSummary, error) {
	if len(rs) == 0 {
		return TransferSummary{}, errors.New("no replica to import; nothing was imported")
	}
	if len(rs) > maxFamily {
		return TransferSummary{}, fmt.Errorf("%d replicas: a family holds at most %d harnesses; nothing was imported", len(rs), maxFamily)
	}
	family := make([]*member, 0, len(rs))
	for _, r := range rs {
		m, err := replicaMember(r)
		if err != nil {
			return TransferSummary{}, err
		}
		family = append(family, m)
	}
	return s.importFamily(family[0].id, family, o, "replica")
}

func replicaMember(r Replica) (*member, error) {
	m := &member{indexJSON: r.IndexJSON, task: r.Task, records: r.Records}
	dec := json.NewDecoder(bytes.NewReader(r.IndexJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m.index); err != nil {
		return nil, fmt.Errorf("the replicated index entry does not decode: %w; nothing was imported", err)
	}
	m.id = m.index.ID
	for _, e := range r.Events {
		m.events = append(m.events, storedEvent{e.N, e.Data})
	}
	return m, nil
}

// ReplicaFamily gathers the family of a root's replica: the root, then, breadth first, every
// sub-agent a member's head state lists, read through read (each once, at most maxFamily
// harnesses in all). Each member is verified as an import verifies it, to learn its
// sub-agents. A root that is a sub-agent is refused, naming its parent.
func (s *Store) ReplicaFamily(root Replica, read func(id string) (Replica, error)) ([]Replica, error) {
	out := []Replica{root}
	seen := map[string]bool{}
	rootID := ""
	for i := 0; i < len(out); i++ {
		m, err := replicaMember(out[i])
		if err != nil {
			return nil, err
		}
		if i == 0 {
			if m.index.ParentHarnessID != "" {
				return nil, fmt.Errorf("harness %s is a sub-agent of %s: adopt %s (its sub-agents go with it)", m.id, m.index.ParentHarnessID, m.index.ParentHarnessID)
			}
			seen[m.id], rootID = true, m.id
		}
		if err := s.verifyMember(m); err != nil {
			return nil, fmt.Errorf("replica does not verify: harness %s: %w", m.id, err)
		}
		for _, c := range m.state.SubAgentIDs {
			if seen[c] {
				continue
			}
			seen[c] = true
			if len(seen) > maxFamily {
				return nil, fmt.Errorf("harness %s has more than %d harnesses in its family", rootID, maxFamily)
			}
			if err := ValidID(c); err != nil {
				return nil, fmt.Errorf("harness %s lists sub-agent %q: %w", m.id, c, err)
			}
			r, err := read(c)
			if err != nil {
				return nil, fmt.Errorf("harness %s lists sub-agent %s, which was not read: %w", m.id, c, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *Store) importFamily(root string, family []*member, o ImportOptions, what string) (TransferSummary, error) {
	sum := TransferSummary{Root: root}
	for _, m := range family {
		if err := s.verifyMember(m); err != nil {
			return sum, fmt.Errorf("%s does not verify: harness %s: %w; nothing was imported", what, m.id, err)
		}
		if m.task != nil {
			var obj map[string]json.RawMessage
			err := json.Unmarshal(m.task, &obj)
			if err == nil && o.CheckTask != nil {
				err = o.CheckTask(m.id, m.task)
			}
			if err != nil {
				return sum, fmt.Errorf("%s does not verify: harness %s: its task: %w; nothing was imported", what, m.id, err)
			}
		}
		sum.Harnesses = append(sum.Harnesses, m.id)
		sum.Records += len(m.records)
		sum.Events += len(m.events)
		for _, n := range m.named {
			sum.Named = append(sum.Named, m.id+"/"+n.name)
		}
	}
	if err := checkFamily(root, family); err != nil {
		return sum, fmt.Errorf("%s does not verify: %w; nothing was imported", what, err)
	}
	remove, err := s.replaced(root, family, o.Replace)
	if err != nil {
		return sum, err
	}
	if o.DryRun {
		return sum, nil
	}
	sum.Replaced = remove
	gone := slices.Clone(remove)
	for _, m := range family {
		gone = append(gone, m.id)
	}
	// The heads file forgets the harnesses the batch replaces before the batch commits, and
	// learns the imported heads after: a crash between the writes leaves a file that names
	// none of them (their heads come from the index again at the next close), never one that
	// names a removed harness or an old head above an imported one's (the next open would
	// report those harnesses lost).
	if err := s.forgetHeads(gone, nil); err != nil {
		return sum, fmt.Errorf("import of %s: the heads file was not written, nothing was imported: %w", root, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, id := range gone {
		deleteHarness(b, id)
	}
	for _, m := range family {
		_ = b.Set([]byte(prefixIndex+m.id), m.indexJSON, nil)
		if m.task != nil {
			_ = b.Set([]byte(prefixTask+m.id), m.task, nil)
		}
		for i, r := range m.records {
			_ = b.Set(chainKey(m.id, m.index.KeyframeSeq+uint64(i)), r, nil)
		}
		for _, e := range m.events {
			_ = b.Set(eventKey(m.id, e.n), e.data, nil)
		}
		for _, n := range m.named {
			_ = b.Set(namedKey(m.id, n.name), n.value, nil)
		}
	}
	for _, id := range gone {
		s.forget(id)
	}
	if err := s.commit(b, false); err != nil {
		var full *DiskFullError
		if errors.As(err, &full) {
			full.Import = true
		}
		return sum, fmt.Errorf("import of %s not committed (nothing was imported): %w", root, err)
	}
	for _, id := range gone {
		s.forget(id) // anything read meanwhile is stale
	}
	now := map[string]uint64{}
	for _, m := range family {
		now[m.id] = m.index.HeadSeq
	}
	if err := s.forgetHeads(nil, now); err != nil {
		return sum, fmt.Errorf("import of %s committed, but the heads file was not written: %w", root, err)
	}
	return sum, nil
}

// deleteHarness puts the removal of everything stored for id into b.
func deleteHarness(b *pebble.Batch, id string) {
	for _, p := range []string{prefixChain, prefixEvents, prefixNamed} {
		start := []byte(p + id + "/")
		_ = b.DeleteRange(start, append(bytes.Clone(start[:len(start)-1]), '/'+1), nil)
	}
	_ = b.Delete([]byte(prefixIndex+id), nil)
	_ = b.Delete([]byte(prefixTask+id), nil)
}

// replaced returns the harnesses an import of family must remove first: none when the store
// holds none of them; with replace, the store's family of root and every member it holds (a
// member of another harness's family is refused). Without replace, any held member is refused.
func (s *Store) replaced(root string, family []*member, replace bool) ([]string, error) {
	all, err := s.List()
	if err != nil {
		return nil, err
	}
	parent := map[string]string{}
	for _, e := range all {
		parent[e.ID] = e.ParentHarnessID
	}
	// Events or a task of a member without an index entry (a harness whose first checkpoint
	// never committed) are not a harness: the import's batch clears them without asking.
	var held []string
	for _, m := range family {
		if _, ok := parent[m.id]; ok {
			held = append(held, m.id)
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	rootOf := func(id string) string {
		for range len(parent) + 1 {
			p := parent[id]
			if p == "" {
				return id
			}
			if _, ok := parent[p]; !ok {
				return id
			}
			id = p
		}
		return id
	}
	var remove []string
	for _, id := range held {
		if r := rootOf(id); r != root {
			return nil, fmt.Errorf("%w: %s, which belongs to the family of %s in this store: importing %s would take it away from there, with or without --replace (delete it, or import into another store)", ErrExists, id, r, root)
		}
	}
	if !replace {
		return nil, fmt.Errorf("%w: %s (use --replace to replace the harness and its sub-agents)", ErrExists, idlist.Join(held, ", "))
	}
	for _, e := range all {
		if rootOf(e.ID) == root {
			remove = append(remove, e.ID)
		}
	}
	return remove, nil
}

// parseExport reads an export, checking the magic, every section's checksum, the header's
// shape and the digest of the whole file. It touches no store.
func parseExport(data []byte) (ExportHeader, []*member, error) {
	var hdr ExportHeader
	switch {
	case bytes.HasPrefix(data, []byte(exportMagic)):
	case bytes.HasPrefix(data, []byte(exportV1Magic)):
		return hdr, nil, errors.New("this is a format-1 chain export (from an earlier harness-edge): it carries the records alone, without the harness's task, event log or sub-agents, so a harness imported from it could not go on; export the harness again with this version (`harness-edge export ID --chain`)")
	case newerMagic(data):
		// A bit flipped in the magic's digit reads the same: a file whose format-2 header is
		// whole is a format-2 export with a damaged magic.
		p := parser{data: data, pos: len(exportMagic)}
		if body, err := p.section(secHeader, "the header"); err == nil && json.Unmarshal(body, &hdr) == nil && hdr.Format == exportFormat {
			return hdr, nil, &TransferError{What: "the magic (the file's first 9 bytes)", Reason: fmt.Sprintf("it is %q, not %q", data[:len(exportMagic)], exportMagic)}
		}
		return hdr, nil, newerExport(fmt.Sprintf("is a format-%c chain export", data[len(exportMagic)-2]))
	case len(data) < len(exportMagic):
		if bytes.HasPrefix([]byte(exportMagic), data) {
			return hdr, nil, &TransferError{What: "the file", Reason: fmt.Sprintf("it is truncated after %d bytes", len(data))}
		}
		fallthrough
	default:
		head := data[:min(len(data), len(exportMagic))]
		if len(head) == len(exportMagic) && (hamming(head, []byte(exportMagic)) <= 4 || hamming(head, []byte(exportV1Magic)) <= 4) {
			return hdr, nil, &TransferError{What: "the magic (the file's first 9 bytes)", Reason: fmt.Sprintf("it is %q, not %q", head, exportMagic)}
		}
		return hdr, nil, errors.New("not a harness-edge export: it does not start with " + strings.TrimSpace(exportMagic))
	}
	p := parser{data: data, pos: len(exportMagic)}
	body, err := p.section(secHeader, "the header")
	if err != nil {
		return hdr, nil, err
	}
	// The header's checksum matched, so what it says is what its writer wrote: a format or a
	// field this version does not know is a newer writer's, not damage.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hdr); err != nil {
		if field, ok := unknownField(err); ok {
			return hdr, nil, newerExport(fmt.Sprintf("has a header field this version does not know (%s)", field))
		}
		return hdr, nil, &TransferError{What: "the header", Offset: len(exportMagic), Reason: "it does not decode: " + err.Error()}
	}
	if hdr.Format > exportFormat {
		return hdr, nil, newerExport(fmt.Sprintf("is format %d", hdr.Format))
	}
	if hdr.Format != exportFormat {
		return hdr, nil, &TransferError{What: "the header", Offset: len(exportMagic), Reason: fmt.Sprintf("it says format %d, this is format %d", hdr.Format, exportFormat)}
	}
	if len(hdr.Members) == 0 || len(hdr.Members) > maxFamily || hdr.Members[0].ID != hdr.Root {
		return hdr, nil, &TransferError{What: "the header", Offset: len(exportMagic), Reason: fmt.Sprintf("its %d members do not start with its root %q", len(hdr.Members), hdr.Root)}
	}
	family := make([]*member, 0, len(hdr.Members))
	for _, hm := range hdr.Members {
		if err := ValidID(hm.ID); err != nil || hm.Records < 1 || hm.Events < 0 || hm.Named < 0 {
			return hdr, nil, &TransferError{What: "the header", Offset: len(exportMagic), Reason: fmt.Sprintf("member %q with %d records and %d events is not valid", hm.ID, hm.Records, hm.Events)}
		}
		m := &member{id: hm.ID}
		if m.indexJSON, err = p.section(secIndex, "the index entry of harness "+hm.ID); err != nil {
			return hdr, nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(m.indexJSON))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m.index); err != nil {
			return hdr, nil, &TransferError{What: "the index entry of harness " + hm.ID, Offset: p.last, Reason: "it does not decode: " + err.Error()}
		}
		if hm.Task {
			if m.task, err = p.section(secTask, "the task of harness "+hm.ID); err != nil {
				return hdr, nil, err
			}
		}
		for i := range hm.Records {
			r, err := p.section(secRecord, fmt.Sprintf("record %d of %d of harness %s", i+1, hm.Records, hm.ID))
			if err != nil {
				return hdr, nil, err
			}
			m.records = append(m.records, r)
		}
		for i := range hm.Events {
			what := fmt.Sprintf("event %d of %d of harness %s", i+1, hm.Events, hm.ID)
			e, err := p.section(secEvent, what)
			if err != nil {
				return hdr, nil, err
			}
			n, w := binary.Uvarint(e)
			if w <= 0 || n == 0 {
				return hdr, nil, &TransferError{What: what, Offset: p.last, Reason: "its number does not decode"}
			}
			m.events = append(m.events, storedEvent{n, e[w:]})
		}
		for i := range hm.Named {
			what := fmt.Sprintf("named checkpoint %d of %d of harness %s", i+1, hm.Named, hm.ID)
			e, err := p.section(secNamed, what)
			if err != nil {
				return hdr, nil, err
			}
			n, w := binary.Uvarint(e)
			if w <= 0 || n > uint64(len(e)-w) {
				return hdr, nil, &TransferError{What: what, Offset: p.last, Reason: "its name does not decode"}
			}
			m.named = append(m.named, storedNamed{string(e[w : w+int(n)]), e[w+int(n):]})
		}
		family = append(family, m)
	}
	end := p.pos
	digest, err := p.section(secEnd, "the closing digest")
	if err != nil {
		return hdr, nil, err
	}
	if sum := sha256.Sum256(data[:end]); !bytes.Equal(digest, sum[:]) {
		return hdr, nil, &TransferError{What: "the file", Offset: end, Reason: "every part's checksum matches but the digest of the whole file does not"}
	}
	if p.pos != len(data) {
		return hdr, nil, &TransferError{What: "the end of the file", Offset: p.pos, Reason: fmt.Sprintf("%d bytes follow the closing digest", len(data)-p.pos)}
	}
	return hdr, family, nil
}

// ErrNewerExport matches (errors.Is) the refusal of an export that a newer harness-edge made,
// in a format or with fields this version does not read.
var ErrNewerExport = errors.New("the export is from a newer harness-edge")

// newerExport refuses an export whose whole header (or magic) says a newer writer made it.
func newerExport(what string) error {
	return fmt.Errorf("%w: it %s, and this harness-edge reads chain exports of format %d: import it with a harness-edge at least as new as the one that exported it; nothing was imported", ErrNewerExport, what, exportFormat)
}

// newerMagic reports whether data starts with the magic of a chain export format after this
// one's ("HECHAIN3\n" to "HECHAIN9\n").
func newerMagic(data []byte) bool {
	n := len(exportMagic)
	return len(data) >= n && bytes.Equal(data[:n-2], []byte(exportMagic[:n-2])) && data[n-2] > exportMagic[n-2] && data[n-2] <= '9' && data[n-1] == '\n'
}

// unknownField returns the field an encoding/json decoder with DisallowUnknownFields refused.
func unknownField(err error) (string, bool) {
	const prefix = "json: unknown field "
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return "", false
	}
	return msg[len(prefix):], true
}

func hamming(a, b []byte) int {
	n := 0
	for i := range a {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

// parser reads the sections of an export in order.
type parser struct {
	data []byte
	pos  int
	last int // where the last section read started
}

// section reads the next section, which must carry tag; what names it in errors.
func (p *parser) section(tag byte, what string) ([]byte, error) {
	start := p.pos
	p.last = start
	fail := func(format string, args ...any) ([]byte, error) {
		return nil, &TransferError{What: what, Offset: start, Reason: fmt.Sprintf(format, args...)}
	}
	if start >= len(p.data) {
		return fail("the file ends before it (truncated)")
	}
	n, w := binary.Uvarint(p.data[start+1:])
	if w <= 0 {
		return fail("its length does not decode (damaged or truncated)")
	}
	bodyAt := start + 1 + w
	if n > uint64(len(p.data)-bodyAt) {
		return fail("it says %d bytes, more than the %d left (damaged or truncated)", n, len(p.data)-bodyAt)
	}
	if len(p.data)-bodyAt-int(n) < 4 {
		return fail("it says %d bytes and a 4-byte checksum, more than the %d left (damaged or truncated)", n, len(p.data)-bodyAt)
	}
	end := bodyAt + int(n)
	want := binary.BigEndian.Uint32(p.data[end:])
	if crc32.Checksum(p.data[start:end], castagnoli) != want {
		return fail("its checksum does not match")
	}
	if p.data[start] != tag {
		return fail("the section there is a %q, not a %q", p.data[start], tag)
	}
	p.pos = end + 4
	return p.data[bodyAt:end], nil
}

// ImportState stores a HarnessState (from JSON). A new harness gets the state as its first
// checkpoint (it has no task: it can be shown, inspected and exported, not resumed). An
// existing one is refused unless replace is set; then the state becomes its next checkpoint:
// its task, event log and checkpoint numbering go on (the state must be of the same task), and
// the log says that the state was replaced.
func (s *Store) ImportState(st *statefmt.HarnessState, replace bool) (Checkpoint, error) {
	if err := ValidID(st.HarnessID); err != nil {
		return Checkpoint{}, err
	}
	idx, err := s.readIndex(st.HarnessID)
	switch {
	case errors.Is(err, ErrNotFound):
		if err := s.checkParentHolds(st); err != nil {
			return Checkpoint{}, err
		}
		if err := s.checkSubAgentsBelong(st); err != nil {
			return Checkpoint{}, err
		}
		return s.Persist(st)
	case err != nil:
		return Checkpoint{}, err
	case !replace:
		return Checkpoint{}, fmt.Errorf("%w: %s (use --replace to overwrite it)", ErrExists, st.HarnessID)
	case idx.TaskID != st.TaskID:
		return Checkpoint{}, fmt.Errorf("harness %s runs task %q, this state is of task %q: replacing a state keeps the harness's task and event log, so it must be of the same task (to replace the whole harness, import an export made with `export --chain`)", st.HarnessID, idx.TaskID, st.TaskID)
	case idx.ParentHarnessID != st.ParentHarnessID:
		return Checkpoint{}, fmt.Errorf("harness %s %s, this state %s: replacing a state keeps the harness's place in its family, so it must have the same parent (to replace the whole family, import an export made with `export --chain`)", st.HarnessID, parentPhrase("is", idx.ParentHarnessID), parentPhrase("says it is", st.ParentHarnessID))
	}
	if err := s.checkSubAgentsBelong(st); err != nil {
		return Checkpoint{}, err
	}
	now := time.Now().UTC()
	return s.PersistWith(st, Extras{
		Events:     []event.Event{{Type: event.Warning, HarnessID: st.HarnessID, Time: now, Message: "state replaced by import (the previous head was checkpoint " + fmt.Sprint(idx.HeadSeq) + ")"}},
		Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: st.HarnessID, Time: now, Reason: "import"},
	})
}

// parentPhrase says whose sub-agent a harness is, after verb: "is a sub-agent of p", "is no
// sub-agent".
func parentPhrase(verb, parent string) string {
	if parent == "" {
		return verb + " no sub-agent"
	}
	return verb + " a sub-agent of " + parent
}

// checkParentHolds refuses a new harness's state that names a parent which the store does not
// hold, or which does not list it among its sub-agents: it would be a sub-agent of no family,
// which no export of a family could carry.
func (s *Store) checkParentHolds(st *statefmt.HarnessState) error {
	p := st.ParentHarnessID
	if p == "" {
		return nil
	}
	advice := fmt.Sprintf("a sub-agent moves with its parent: `export %s --chain` where it is, and import that", p)
	parent, err := s.Restore(p)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("harness %s is a sub-agent of %s, which this store does not hold: %s", st.HarnessID, p, advice)
	case err != nil:
		return fmt.Errorf("harness %s is a sub-agent of %s, which does not read: %w", st.HarnessID, p, err)
	case !slices.Contains(parent.SubAgentIDs, st.HarnessID):
		return fmt.Errorf("harness %s is a sub-agent of %s, whose state here does not list it: %s", st.HarnessID, p, advice)
	}
	return nil
}

// checkSubAgentsBelong refuses a state that lists, as its sub-agent, a harness the store holds
// under another parent (or none): the harness would be claimed by two families, and neither
// could be exported. A listed sub-agent the store does not hold is left alone: a parent lists a
// child before the child is made, and a family's states import parents first.
func (s *Store) checkSubAgentsBelong(st *statefmt.HarnessState) error {
	for _, c := range st.SubAgentIDs {
		if ValidID(c) != nil {
			continue // Persist refuses it
		}
		idx, err := s.readIndex(c)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("harness %s lists sub-agent %s, which does not read: %w", st.HarnessID, c, err)
		case idx.ParentHarnessID != st.HarnessID:
			return fmt.Errorf("harness %s lists sub-agent %s, which %s in this store: a state cannot take a harness from its family", st.HarnessID, c, parentPhrase("is", idx.ParentHarnessID))
		}
	}
	return nil
}
