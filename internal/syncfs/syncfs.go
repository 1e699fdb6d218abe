// Package syncfs counts the fsyncs a Pebble store makes: the benchmarks' fsyncs per step.
package syncfs

import (
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS counts the fsyncs (fsync and fdatasync, of files and directories) that go through a
// Pebble file system. A SyncTo that only starts write-back is not counted.
type FS struct {
	vfs.FS
	n     atomic.Int64
	delay time.Duration
}

// New counts the fsyncs of the real file system.
func New() *FS { return &FS{FS: vfs.Default} }

// Slow counts the fsyncs of the real file system and makes each take delay longer, as a slow
// disk's would: a test of what shares fsyncs then does not depend on how fast this machine's
// disk is against its CPUs.
func Slow(delay time.Duration) *FS { return &FS{FS: vfs.Default, delay: delay} }

// Count is how many fsyncs went through since New or the last Reset.
func (fs *FS) Count() int64 { return fs.n.Load() }

// Reset starts the count again.
func (fs *FS) Reset() { fs.n.Store(0) }

func (fs *FS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &syncFile{File: f, fs: fs}, nil
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
	fs *FS
}

// synced counts one fsync, after the FS's delay.
func (f *syncFile) synced() {
	f.fs.n.Add(1)
	if f.fs.delay > 0 {
		time.Sleep(f.fs.delay)
	}
}

func (f *syncFile) Sync() error {
	f.synced()
	return f.File.Sync()
}

func (f *syncFile) SyncData() error {
	f.synced()
	return f.File.SyncData()
}

func (f *syncFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.synced()
	}
	return full, err
}
