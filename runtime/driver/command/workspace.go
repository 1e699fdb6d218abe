package command

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
)

// hashedWhole is the largest file whose content the fingerprint reads; larger ones count by size,
// modification and change times and inode.
const hashedWhole = 8 << 20

// racyWindow: a file modified this close to the moment it was read may change again without its
// modification time moving (coarse timestamps: FAT on an SD card keeps two seconds), so its sum
// is not kept for the next fingerprint.
const racyWindow = 2 * time.Second

// fileSums fingerprints a workspace for the circuit breaker, which asks before and after every
// iteration whether it changed anything. A file's content is read again only when its metadata
// (size, modification and change times, inode, mode) differ from when it was last read: a
// workspace of thousands of files an iteration did not touch costs a walk and a stat each, not
// reading every byte of it twice per iteration. The first fingerprint of a process reads all.
type fileSums struct {
	mu   sync.Mutex
	seen map[string]fileSum
	// now is the clock of the racy window (time.Now when nil); reads counts the files read.
	now   func() time.Time
	reads int
}

// fileMeta is what the fingerprint compares of a file instead of reading it.
type fileMeta struct {
	size, mtime, ctime int64
	ino                uint64
	mode               fs.FileMode
}

type fileSum struct {
	fileMeta
	sum uint64
}

// hash fingerprints dir: every file's path, mode and content (files over hashedWhole by their
// metadata instead), in walk order. Files that cannot be read count as absent.
func (c *fileSums) hash(dir string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]fileSum, len(c.seen))
	h := xxhash.New()
	var sum [8]byte
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable parts count as they are: absent
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return nil
		}
		fmt.Fprintf(h, "%s\x00%o\x00", rel, info.Mode())
		switch {
		case d.Type().IsRegular() && info.Size() <= hashedWhole:
			if s, ok := c.sumOf(path, info); ok {
				seen[path] = s
				binary.LittleEndian.PutUint64(sum[:], s.sum)
				h.Write(sum[:])
			}
		case d.Type().IsRegular():
			// Not read: its size and times, the change time too, which a write moves even when
			// the modification time is put back.
			m := metaOf(info)
			fmt.Fprintf(h, "%d\x00%d\x00%d\x00%d", m.size, m.mtime, m.ctime, m.ino)
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(path)
			h.WriteString(target)
		}
		h.WriteString("\x00")
		return nil
	})
	c.seen = seen // files gone since are forgotten
	return hex.EncodeToString(h.Sum(nil))
}

// sumOf is the content sum of the regular file at path: the one read last time when its metadata
// is unchanged, else read now. A sum read within racyWindow of the file's modification is used
// once and not kept.
func (c *fileSums) sumOf(path string, info fs.FileInfo) (fileSum, bool) {
	s := fileSum{fileMeta: metaOf(info)}
	if old, ok := c.seen[path]; ok && old.fileMeta == s.fileMeta {
		return old, true
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fileSum{}, false
	}
	c.reads++
	s.sum = xxhash.Sum64(data)
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	if now().Sub(time.Unix(0, max(s.mtime, s.ctime))) < racyWindow {
		s.size = -1 // matches no file: read again next time
	}
	return s, true
}

// metaOf is a file's metadata as the fingerprint compares it.
func metaOf(info fs.FileInfo) fileMeta {
	m := fileMeta{size: info.Size(), mtime: info.ModTime().UnixNano(), mode: info.Mode()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		m.ctime, m.ino = time.Unix(st.Ctim.Unix()).UnixNano(), st.Ino
	}
	return m
}
