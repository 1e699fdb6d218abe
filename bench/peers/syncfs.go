package main

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncFS counts the fsyncs (fsync and fdatasync, of files and directories) that go through a
// Pebble file system. A SyncTo that only starts write-back is not counted.
type syncFS struct {
	vfs.FS
	n atomic.Int64
}

func newSyncFS() *syncFS { return &syncFS{FS: vfs.Default} }

func (fs *syncFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &syncFile{File: f, n: &fs.n}, nil
}

func (fs *syncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs *syncFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

func (fs *syncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs *syncFS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs *syncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs *syncFS) Unwrap() vfs.FS { return fs.FS }

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
