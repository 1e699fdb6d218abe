package store

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"

	"github.com/harness-edge/harness-edge/statefmt"
)

// chainFileMagic starts a chain export: the raw records of one harness, for moving it to
// another device with its history (from its newest keyframe) intact.
//
//	"HECHAIN1\n" uvarint(len) index-entry-JSON  { uvarint(len) record-envelope }*
const chainFileMagic = "HECHAIN1\n"

// IsChainFile reports whether data starts like a chain export.
func IsChainFile(data []byte) bool {
	return len(data) >= len(chainFileMagic) && string(data[:len(chainFileMagic)]) == chainFileMagic
}

// ExportChain writes the stored records of id, as they are in the store, to w.
func (s *Store) ExportChain(id string, w io.Writer) error {
	idx, err := s.readIndex(id)
	if err != nil {
		return err
	}
	idxJSON, _ := json.Marshal(idx)
	bw := bufio.NewWriter(w)
	bw.WriteString(chainFileMagic)
	bw.Write(binary.AppendUvarint(nil, uint64(len(idxJSON))))
	bw.Write(idxJSON)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: chainKey(id, 0), UpperBound: chainKey(id, idx.HeadSeq+1)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		bw.Write(binary.AppendUvarint(nil, uint64(len(it.Value()))))
		bw.Write(it.Value())
	}
	if err := it.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// ErrExists is returned by imports of a harness the store already holds (without replace).
var ErrExists = errors.New("harness already exists")

// ImportChain reads a chain export, verifies it by replaying every record (hashes, chain links,
// and that the head state decodes), and writes it in one synced batch. It refuses to overwrite an
// existing harness unless replace is set.
func (s *Store) ImportChain(data []byte, replace bool) (IndexEntry, error) {
	var idx IndexEntry
	if !IsChainFile(data) {
		return idx, errors.New("not a harness-edge chain export (bad magic)")
	}
	pos := len(chainFileMagic)
	next := func(what string) ([]byte, error) {
		n, w := binary.Uvarint(data[pos:])
		if w <= 0 || n > uint64(len(data)-pos-w) {
			return nil, fmt.Errorf("chain export: %s at byte %d is truncated", what, pos)
		}
		b := data[pos+w : pos+w+int(n)]
		pos += w + int(n)
		return b, nil
	}
	idxJSON, err := next("index entry")
	if err != nil {
		return idx, err
	}
	if err := json.Unmarshal(idxJSON, &idx); err != nil {
		return idx, fmt.Errorf("chain export: index entry: %w", err)
	}
	if err := ValidID(idx.ID); err != nil {
		return idx, err
	}
	if _, err := s.readIndex(idx.ID); err == nil && !replace {
		return idx, fmt.Errorf("%w: %s (use --replace to overwrite it)", ErrExists, idx.ID)
	}
	c, err := s.engine.NewChain(s.policy)
	if err != nil {
		return idx, err
	}
	defer c.Close()
	type stored struct {
		seq uint64
		env []byte
	}
	var records []stored
	var scratch []byte
	var stream streamReader
	defer stream.close()
	for pos < len(data) {
		env, err := next("record")
		if err != nil {
			return idx, err
		}
		rec, err := statefmt.DecodeRecord(env)
		if err != nil {
			return idx, fmt.Errorf("chain export: record %d: %w", len(records)+1, err)
		}
		raw, err := s.decompress(rec, &scratch, &stream)
		if err != nil {
			return idx, fmt.Errorf("chain export: record %d: %w", rec.Seq, err)
		}
		stateLen, err := stateLenOf(rec, raw)
		if err == nil {
			err = c.Push(infoOf(rec, stateLen), raw)
		}
		if err != nil {
			return idx, fmt.Errorf("chain export: record %d does not verify: %w", rec.Seq, err)
		}
		if len(records) == 0 {
			idx.KeyframeSeq = rec.Seq
		}
		records = append(records, stored{rec.Seq, env})
	}
	head := c.Head()
	if len(records) == 0 || head.Seq != idx.HeadSeq {
		return idx, fmt.Errorf("chain export: records end at %d, the index says %d", head.Seq, idx.HeadSeq)
	}
	if _, err := statefmt.DecodeBinary(c.State(nil)); err != nil {
		return idx, fmt.Errorf("chain export: head state: %w", err)
	}
	s.forget(idx.ID)
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange(chainKey(idx.ID, 0), chainKey(idx.ID, 1<<64-1), nil)
	for _, r := range records {
		_ = b.Set(chainKey(idx.ID, r.seq), r.env, nil)
	}
	idxJSON, _ = json.Marshal(idx)
	_ = b.Set([]byte(prefixIndex+idx.ID), idxJSON, nil)
	return idx, b.Commit(pebble.Sync)
}

// ImportState stores a HarnessState (from JSON) as a new harness, refusing to overwrite an
// existing one unless replace is set.
func (s *Store) ImportState(st *statefmt.HarnessState, replace bool) (Checkpoint, error) {
	if err := ValidID(st.HarnessID); err != nil {
		return Checkpoint{}, err
	}
	if _, err := s.readIndex(st.HarnessID); err == nil {
		if !replace {
			return Checkpoint{}, fmt.Errorf("%w: %s (use --replace to overwrite it)", ErrExists, st.HarnessID)
		}
		if err := s.Delete(st.HarnessID); err != nil {
			return Checkpoint{}, err
		}
	}
	return s.Persist(st)
}
