// Package tmpfs mounts small real file systems for the tests that fill a disk.
package tmpfs

import (
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
