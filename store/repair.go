package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// Repair: what `doctor --repair` does with the damage Verify finds.
//
// Each damaged harness is handled on its own; the others are not touched.
//   - Everything of it that can still be read (index entry, task, records, events, as stored)
//     is first copied, key by key, into a quarantine file, quarantine/ID-TIME.jsonl in the store
//     directory, with what was damaged. Nothing is thrown away without a copy.
//   - Recovered: when a checkpoint of its chain still replays, the newest that does becomes the
//     harness's state again. Its keys are removed (excised from Pebble's tables, so the damaged
//     blocks are never read for them again) and it is written anew: the state as a keyframe,
//     the task, and the events that could be read before the first damaged one. Its chain
//     starts again at checkpoint 1; a warning event says what was recovered and what was lost.
//     A harness whose data all reads but whose newer acknowledged checkpoints Pebble dropped is
//     recovered in place: its newest stored checkpoint is accepted, nothing is rewritten.
//   - Quarantined: when no checkpoint replays (or its index entry is gone), the harness is
//     removed from the store; the quarantine file keeps what could be read.
//   - A damaged heads file is written again from the index.
// A harness written by a newer harness-edge (a state or record format this build does not read)
// is not damage: Repair refuses, before it changes anything, and says to use that version.
// What Repair cannot do it says: damage outside every harness's keys (a table block of keys no
// harness names) stays reported by verify, and a store that does not open (a missing manifest
// marker, a damaged MANIFEST) is not repaired: restore those files from a backup.

// RepairOutcome says what Repair did with one damaged harness.
type RepairOutcome struct {
	ID     string `json:"id"`
	Damage string `json:"damage"`
	// Action is "recovered" or "quarantined".
	Action string `json:"action"`
	// Seq is the checkpoint the harness was recovered to (its number in the old chain), and
	// Acknowledged the newest the store had acknowledged, when known.
	Seq          uint64 `json:"seq,omitempty"`
	Acknowledged uint64 `json:"acknowledged,omitempty"`
	// Events is how many events were kept.
	Events int `json:"events"`
	// Quarantine is the file that keeps what could be read, "" when nothing was rewritten.
	Quarantine string `json:"quarantine,omitempty"`
}

// RepairReport is what Repair did.
type RepairReport struct {
	Harnesses []RepairOutcome `json:"harnesses"`
	// HeadsRewritten says the damaged heads file was written again from the index.
	HeadsRewritten bool `json:"headsRewritten,omitempty"`
	// Remaining are the problems Verify still finds after the repair.
	Remaining []Problem `json:"remaining,omitempty"`
}

// Repair recovers or quarantines every damaged harness (see above) and returns what it did.
// The store must not be in use by a run.
func (s *Store) Repair() (RepairReport, error) {
	var rep RepairReport
	problems, err := s.Verify("")
	if err != nil {
		return rep, err
	}
	damage := map[string]string{}
	for _, p := range problems {
		if p.ID != "" && damage[p.ID] == "" {
			damage[p.ID] = p.Reason
		}
	}
	s.mu.Lock()
	for id, err := range s.damage {
		if damage[id] == "" {
			damage[id] = err.Error()
		}
	}
	s.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(damage)) {
		if strings.Contains(damage[id], statefmt.NewerBuild) {
			return rep, fmt.Errorf("harness %s was written by a newer harness-edge, which this build cannot read (%s): that is not damage; repair the store with that version or a later one (nothing was changed)", id, damage[id])
		}
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range damage {
			if !yield(id) {
				return
			}
		}
	}) {
		out, err := s.repairHarness(id, damage[id])
		if err != nil {
			return rep, fmt.Errorf("repair harness %s: %w", id, err)
		}
		rep.Harnesses = append(rep.Harnesses, out)
	}
	if s.headsErr != nil {
		s.headsMu.Lock()
		s.commitFailed.Store(false)
		err := s.saveHeads(true)
		s.headsMu.Unlock()
		if err != nil {
			return rep, fmt.Errorf("rewrite the heads file: %w", err)
		}
		s.headsErr, rep.HeadsRewritten = nil, true
	}
	if rep.Remaining, err = s.Verify(""); err != nil {
		return rep, err
	}
	return rep, nil
}

// repairHarness recovers or quarantines one damaged harness.
func (s *Store) repairHarness(id, damage string) (RepairOutcome, error) {
	out := RepairOutcome{ID: id, Damage: damage}
	s.mu.Lock()
	out.Acknowledged = s.heads[id]
	s.mu.Unlock()
	s.forget(id)
	// The damage found at open is what is being repaired: read the harness as stored.
	s.mu.Lock()
	found := s.damage[id]
	delete(s.damage, id)
	s.mu.Unlock()
	out, err := s.repairStored(id, out)
	if err != nil && found != nil {
		s.mu.Lock()
		s.damage[id] = found
		s.mu.Unlock()
	}
	return out, err
}

// repairStored is repairHarness once the damage found at open is set aside.
func (s *Store) repairStored(id string, out RepairOutcome) (RepairOutcome, error) {
	damage := out.Damage
	idx, ierr := s.indexEntry(id)
	// Newer acknowledged checkpoints dropped, but what is stored reads whole: accept it.
	if ierr == nil && len(s.verifyHarness(idx)) == 0 {
		n := 0
		_ = s.Events(id, 0, func(event.Event) bool { n++; return true })
		out.Action, out.Seq, out.Events = "recovered", idx.HeadSeq, n
		return out, s.forgetHeads([]string{id}, map[string]uint64{id: idx.HeadSeq})
	}
	var st *statefmt.HarnessState
	if ierr == nil {
		for seq := idx.HeadSeq; seq >= 1 && st == nil; seq-- {
			if got, err := s.restoreWith(id, idx, seq); err == nil {
				st, out.Seq = got, seq
			}
		}
	}
	var events []event.Event
	_ = s.Events(id, 0, func(e event.Event) bool {
		if e.N != uint64(len(events)+1) {
			return false
		}
		events = append(events, e)
		return true
	})
	task, terr := s.Task(id)
	if terr != nil {
		task = nil
	}
	path, err := s.quarantine(id, damage)
	if err != nil {
		return out, err
	}
	out.Quarantine = path
	// A recovered harness keeps its named checkpoints (copies apart from the chain).
	if err := s.excise(id, st == nil); err != nil {
		return out, err
	}
	if st == nil {
		out.Action = "quarantined"
		return out, s.forgetHeads([]string{id}, nil)
	}
	out.Action, out.Events = "recovered", len(events)
	lost := "nothing newer was acknowledged"
	if out.Acknowledged > out.Seq || ierr == nil && idx.HeadSeq > out.Seq {
		lost = fmt.Sprintf("checkpoints after %d were lost", out.Seq)
	}
	for i := range events {
		events[i].N, events[i].HarnessID = 0, id
	}
	warn := event.Event{Type: event.Warning, HarnessID: id, Time: time.Now().UTC(),
		Message: fmt.Sprintf("repaired: recovered to checkpoint %d (%s; damage: %s); what could be read is kept in %s", out.Seq, lost, damage, path)}
	cp, err := s.PersistWith(st, Extras{Events: append(events, warn), Task: task})
	if err != nil {
		return out, err
	}
	return out, s.forgetHeads([]string{id}, map[string]uint64{id: cp.Seq})
}

// quarantinedKey is one line of a quarantine file after its header.
type quarantinedKey struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

// quarantine copies every key of harness id that can still be read into a new file under
// quarantine/, after a header naming the harness and the damage, and returns its path.
func (s *Store) quarantine(id, damage string) (string, error) {
	dir := filepath.Join(s.dir, "quarantine")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.jsonl", id, time.Now().UTC().Format("20060102T150405.000000000Z")))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	enc := json.NewEncoder(f)
	type header struct {
		Harness string   `json:"harness"`
		Damage  string   `json:"damage"`
		Time    string   `json:"time"`
		Unread  []string `json:"unreadable,omitempty"`
	}
	var lines []quarantinedKey
	var unread []string
	for _, sp := range harnessSpans(id) {
		if err := s.readSpan(sp, func(k, v []byte) { lines = append(lines, quarantinedKey{k, v}) }); err != nil {
			unread = append(unread, fmt.Sprintf("%s: %s", sp.Start, errMsg(err)))
		}
	}
	err = enc.Encode(header{Harness: id, Damage: damage, Time: time.Now().UTC().Format(time.RFC3339Nano), Unread: unread})
	for i := 0; err == nil && i < len(lines); i++ {
		err = enc.Encode(lines[i])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// readSpan calls f with each key and value in sp until the first that cannot be read.
func (s *Store) readSpan(sp pebble.KeyRange, f func(k, v []byte)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		f(bytes.Clone(it.Key()), bytes.Clone(v))
	}
	return it.Error()
}

// harnessSpans are the key ranges that hold harness id: its index entry, task, records,
// events and, last, its named checkpoints.
func harnessSpans(id string) []pebble.KeyRange {
	exact := func(p string) pebble.KeyRange {
		k := []byte(p + id)
		return pebble.KeyRange{Start: k, End: append(bytes.Clone(k), 0)}
	}
	under := func(p string) pebble.KeyRange {
		return pebble.KeyRange{Start: []byte(p + id + "/"), End: []byte(p + id + string(rune('/'+1)))}
	}
	return []pebble.KeyRange{exact(prefixIndex), exact(prefixTask), under(prefixChain), under(prefixEvents), under(prefixNamed)}
}

// excise removes every key of harness id from the database: Pebble cuts the spans out of its
// tables, so a damaged block in them is not read again. Cutting a span out of a table needs
// the table's index block; when that is what is damaged, the keys are deleted with range
// deletions instead, and the damaged table stays (verify goes on reporting it).
func (s *Store) excise(id string, named bool) error {
	spans := harnessSpans(id)
	if !named {
		spans = spans[:len(spans)-1]
	}
	for _, sp := range spans {
		if err := s.db.Excise(context.Background(), sp); err != nil {
			if _, ok := corruption(err); !ok {
				return fmt.Errorf("remove the keys of harness %s: %w", id, err)
			}
			b := s.db.NewBatch()
			for _, sp := range spans {
				_ = b.DeleteRange(sp.Start, sp.End, nil)
			}
			err := s.commit(b, true)
			b.Close()
			if err != nil {
				return fmt.Errorf("remove the keys of harness %s: %w", id, err)
			}
			return nil
		}
	}
	return nil
}
