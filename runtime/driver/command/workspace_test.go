package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// settle waits out the file system's timestamp granule (a few milliseconds of coarse clock), so
// that the next change moves the modification time.
func settle() { time.Sleep(20 * time.Millisecond) }

// The fingerprint reads a file's content again only when its metadata changed: an iteration that
// touched one file of two hundred costs one read, not two hundred.
func TestTheWorkspaceFingerprintReadsOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 200 {
		files[filepath.Join("src", strings.Repeat("d", i%5), "f"+string(rune('a'+i%26))+string(rune('a'+i/26)))] = strings.Repeat("text ", i+1)
	}
	writeFiles(t, dir, files)
	later := func() time.Time { return time.Now().Add(time.Hour) } // every file outside the racy window
	c := &fileSums{now: later}
	first := c.hash(dir)
	if c.reads != 200 {
		t.Fatalf("the first fingerprint read %d files, want all 200", c.reads)
	}
	if again := c.hash(dir); again != first || c.reads != 200 {
		t.Fatalf("an unchanged workspace: fingerprint changed %v, %d more reads (want none)", again != first, c.reads-200)
	}
	settle()
	writeFiles(t, dir, map[string]string{filepath.Join("src", "fa"+"a"): "changed"})
	changed := c.hash(dir)
	if changed == first || c.reads != 201 {
		t.Fatalf("one file changed: fingerprint changed %v, %d reads (want 1)", changed != first, c.reads-200)
	}
	if fresh := (&fileSums{}).hash(dir); fresh != changed {
		t.Fatal("the fingerprint from kept sums differs from one read afresh")
	}
}

// Every kind of change moves the fingerprint, and it equals one computed without kept sums.
func TestTheWorkspaceFingerprintSeesEveryChange(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "alpha", "b/c.txt": "gamma", "b/d.txt": "delta"})
	c := &fileSums{now: func() time.Time { return time.Now().Add(time.Hour) }}
	changes := []struct {
		what string
		do   func() error
	}{
		{"same size, new content", func() error { return os.WriteFile(filepath.Join(dir, "a.txt"), []byte("ALPHA"), 0o644) }},
		{"same content, old modification time put back", func() error {
			p := filepath.Join(dir, "b/c.txt")
			info, err := os.Stat(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte("GAMMA"), 0o644); err != nil {
				return err
			}
			return os.Chtimes(p, info.ModTime(), info.ModTime())
		}},
		{"a file added", func() error { return os.WriteFile(filepath.Join(dir, "b/e.txt"), nil, 0o644) }},
		{"a file removed", func() error { return os.Remove(filepath.Join(dir, "b/d.txt")) }},
		{"a file renamed", func() error { return os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "z.txt")) }},
		{"a mode changed", func() error { return os.Chmod(filepath.Join(dir, "z.txt"), 0o755) }},
		{"a link added", func() error { return os.Symlink("z.txt", filepath.Join(dir, "link")) }},
		{"a link retargeted", func() error {
			if err := os.Remove(filepath.Join(dir, "link")); err != nil {
				return err
			}
			return os.Symlink("b/c.txt", filepath.Join(dir, "link"))
		}},
	}
	prev := c.hash(dir)
	for _, ch := range changes {
		settle()
		if err := ch.do(); err != nil {
			t.Fatalf("%s: %v", ch.what, err)
		}
		got := c.hash(dir)
		if got == prev {
			t.Fatalf("%s: the fingerprint did not change", ch.what)
		}
		if fresh := (&fileSums{}).hash(dir); fresh != got {
			t.Fatalf("%s: the fingerprint from kept sums differs from one read afresh", ch.what)
		}
		prev = got
	}
}

// A file modified within the racy window of its reading is read again next time: a second change
// inside one tick of a coarse clock leaves its metadata as it was.
func TestAFileModifiedJustBeforeItWasReadIsReadAgain(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"new.txt": "just written"})
	c := &fileSums{}
	c.hash(dir)
	c.hash(dir)
	if c.reads != 2 {
		t.Fatalf("%d reads of a file written just now, want 2 (kept for no next time)", c.reads)
	}
	c.now = func() time.Time { return time.Now().Add(time.Hour) }
	c.hash(dir)
	c.hash(dir)
	if c.reads != 3 {
		t.Fatalf("%d reads, want 3: a file outside the window is kept after one read", c.reads)
	}
}

// A file too large to read counts by its metadata: a same-size edit that puts the modification
// time back still moves its change time, and the fingerprint.
func TestALargeFilesEditMovesTheFingerprintWhateverItsModificationTime(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big.bin")
	data := make([]byte, hashedWhole+1)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	c := &fileSums{}
	before := c.hash(dir)
	if c.reads != 0 {
		t.Fatalf("a file over %d bytes was read", hashedWhole)
	}
	settle()
	data[len(data)/2] = 1
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after := c.hash(dir); after == before {
		t.Fatal("a same-size edit with the modification time put back left the fingerprint as it was")
	}
}
