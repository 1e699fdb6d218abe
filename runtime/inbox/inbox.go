// Package inbox holds the messages a human sends a running harness (`harness-edge tell`) until
// its agent takes them into its next prompt.
//
// A message is a file under the store directory, DIR/HARNESS/NAME.msg, written whole and synced
// (a temporary file, fsync, rename, fsync of the directory) before Tell returns: a message told
// is never lost, whatever dies after. Names sort in the order messages were told. The agent that
// takes messages records their names in its own checkpoint before it removes them, so a message
// reaches exactly one iteration even when the process dies in between (see Take).
package inbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// DirName is the directory under the store directory that holds the inboxes.
	DirName = "inbox"
	// MaxBytes is the largest message.
	MaxBytes = 64 << 10
	// MaxPending is how many messages may wait for a harness at once.
	MaxPending = 100
)

// Dir is the inbox directory of the store in storeDir.
func Dir(storeDir string) string { return filepath.Join(storeDir, DirName) }

// Message is one message to a harness's agent.
type Message struct {
	// Name identifies the message in its inbox.
	Name string    `json:"name"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
	// From says who sent it: "human" for tell, "inbox file NAME" for a workspace inbox file.
	From string `json:"from"`
}

// ErrFull says that a harness has MaxPending messages waiting.
var ErrFull = errors.New("inbox full")

// Check says what is wrong with a message's text, or nil.
func Check(text string) error {
	switch {
	case strings.TrimSpace(text) == "":
		return errors.New("the message is empty")
	case len(text) > MaxBytes:
		return fmt.Errorf("the message is %d bytes, over the %d-byte limit", len(text), MaxBytes)
	case !utf8.ValidString(text):
		return errors.New("the message is not valid UTF-8 text")
	}
	return nil
}

// safe makes a harness id a file name (store ids are already safe; this keeps any id inside).
func safe(id string) string {
	id = strings.NewReplacer("/", "_", "\\", "_", "\x00", "_").Replace(id)
	if strings.Trim(id, ".") == "" {
		id = "_" + id
	}
	return id
}

// Tell stores a message for harness id durably. It refuses (storing nothing) an invalid text
// and a full inbox.
func Tell(dir, id, text string, now time.Time) (Message, error) {
	if err := Check(text); err != nil {
		return Message{}, err
	}
	hd := filepath.Join(dir, safe(id))
	if err := os.MkdirAll(hd, 0o700); err != nil {
		return Message{}, fmt.Errorf("inbox: %w", err)
	}
	if pending, err := Pending(dir, id); err != nil {
		return Message{}, err
	} else if len(pending) >= MaxPending {
		return Message{}, fmt.Errorf("%w: harness %s has %d messages its agent has not taken yet", ErrFull, id, len(pending))
	}
	rnd := make([]byte, 4)
	_, _ = rand.Read(rnd)
	m := Message{Name: fmt.Sprintf("%020d-%s", now.UnixNano(), hex.EncodeToString(rnd)), Time: now.UTC(), Text: text, From: "human"}
	data, err := json.Marshal(m)
	if err != nil {
		return Message{}, err
	}
	tmp := filepath.Join(hd, "."+m.Name+".tmp")
	if err := writeSynced(tmp, data); err != nil {
		os.Remove(tmp)
		return Message{}, fmt.Errorf("inbox: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(hd, m.Name+".msg")); err != nil {
		os.Remove(tmp)
		return Message{}, fmt.Errorf("inbox: %w", err)
	}
	if err := syncDir(hd); err != nil {
		return Message{}, fmt.Errorf("inbox: %w", err)
	}
	return m, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// Pending returns the messages waiting for harness id, oldest first. A file that does not read
// as a message (damaged) is skipped: it is not the agent's to see.
func Pending(dir, id string) ([]Message, error) {
	hd := filepath.Join(dir, safe(id))
	entries, err := os.ReadDir(hd)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	var out []Message
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".msg")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(hd, e.Name()))
		if err != nil || len(data) > 2*MaxBytes+1024 {
			continue
		}
		var m Message
		if json.Unmarshal(data, &m) != nil || m.Name != name || Check(m.Text) != nil {
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Message) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Remove deletes the named messages of harness id (those taken); names already gone are fine.
func Remove(dir, id string, names []string) error {
	hd := filepath.Join(dir, safe(id))
	var errs []error
	removed := 0
	for _, n := range names {
		if strings.ContainsAny(n, "/\\") {
			continue
		}
		switch err := os.Remove(filepath.Join(hd, n+".msg")); {
		case err == nil:
			removed++
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	if removed > 0 {
		errs = append(errs, syncDir(hd))
	}
	return errors.Join(errs...)
}

// RemoveHarness deletes harness id's inbox with the messages still in it (a harness deleted
// from the store leaves none for a new one with its id).
func RemoveHarness(dir, id string) error {
	return os.RemoveAll(filepath.Join(dir, safe(id)))
}

// Exists reports whether a message of harness id is still in its inbox.
func Exists(dir, id, name string) bool {
	_, err := os.Stat(filepath.Join(dir, safe(id), name+".msg"))
	return err == nil
}
