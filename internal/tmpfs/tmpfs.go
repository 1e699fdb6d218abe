// Package tmpfs mounts small real file systems for the tests that fill a disk.
package tmpfs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (as mount takes it: "48m") on a fresh directory, readable by
// its owner only, and unmounts it when the test ends. Where mounting needs rights the test does
// not have (not root, or no real kernel), the test is skipped with the reason.
func Mount(t testing.TB, size string) string {
	t.Helper()
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): needs root on a real kernel", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	return mnt
}

// Fill writes a file that leaves about left bytes free on mnt's file system, and returns its
// path: remove it to give the room back.
func Fill(t testing.TB, mnt string, left int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*int64(st.Bsize)-left), 0o600); err != nil {
		t.Fatal(err)
	}
	return filler
}
