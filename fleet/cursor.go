package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CursorFile is the replication cursor's file in the store directory.
const CursorFile = "fleet-cursor.json"

// cursor is how far a device has replicated each harness: what JetStream acknowledged. It is
// written beside the store (synced, replaced atomically) at most every CursorSync while it
// moves and when replication stops, so a device that crashes sends again at most that much,
// which JetStream drops as duplicates within DedupWindow. Writing it at every step would
// add two fsyncs to each.
type cursor struct {
	Device    string                `json:"device"`
	Harnesses map[string]*harnessAt `json:"harnesses"`
	dirty     bool
}

// harnessAt is one harness's replication position.
type harnessAt struct {
	// Gen tells a harness from an earlier one of the same id (deleted, or replaced by an
	// import): its CreatedAt. A new generation starts from nothing.
	Gen    int64  `json:"gen"`
	Record uint64 `json:"record"` // the last record sent
	Event  uint64 `json:"event"`  // the last event sent
	Index  string `json:"index"`  // digest of the last index entry sent
	Task   string `json:"task"`   // digest of the task sent
}

func loadCursor(dir, device string) (*cursor, error) {
	path := filepath.Join(dir, CursorFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &cursor{Device: device, Harnesses: map[string]*harnessAt{}}, nil
	}
	if err != nil {
		return nil, err
	}
	var c cursor
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v): remove it to replicate every harness again (JetStream drops what it already holds within %s)", path, err, DedupWindow)
	}
	if c.Device != device || c.Harnesses == nil {
		// Another device name: what was sent went under the other name.
		return &cursor{Device: device, Harnesses: map[string]*harnessAt{}}, nil
	}
	return &c, nil
}

// save writes the cursor durably: a synced temporary file renamed over the old one, then the
// directory synced.
func (c *cursor) save(dir string) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, CursorFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replication cursor %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
