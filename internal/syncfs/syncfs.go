// Package syncfs counts the fsyncs a Pebble store makes: the benchmarks' fsyncs per step.
package syncfs

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS counts the fsyncs (fsync and fdatasync, of files and directories) that go through a
// Pebble file system. A SyncTo that only starts write-back is not counted.
type FS struct {
	vfs.FS
	n atomic.Int64
}

// New counts the fsyncs of the real file system.
func New() *FS { return &FS{FS: vfs.Default} }

// Count is how many fsyncs went through since New or the last Reset.
func (fs *FS) Count() int64 { return fs.n.Load() }

// Reset starts the count again.
func (fs *FS) Reset() { fs.n.Store(0) }

func (fs *FS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &syncFile{File: f, n: &fs.n}, nil
}

func (fs *FS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

func (fs *FS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs *FS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs *FS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs *FS) Unwrap() vfs.FS { return fs.FS }

type syncFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *syncFile) Sync() error {
	f.n.Add(1)
	return f.File.Sync()
}

func (f *syncFile) SyncData() error {
	f.n.Add(1)
	return f.File.SyncData()
}

func (f *syncFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.n.Add(1)
	}
	return full, err
}
