package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/store/trust"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/store"
)

// otherUID is a uid that is not ours, for files "another user" made. Giving a file to
// another user needs root: tests that do skip otherwise.
const otherUID = 54321

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: giving a file to another user needs root")
	}
}

// refused opens the store in dir and wants an ErrUntrusted whose message has every part of want.
func refused(t *testing.T, dir string, want ...string) {
	t.Helper()
	s, err := store.OpenStore(dir, store.StoreOptions{Engine: bridge.Fallback()})
	if err == nil {
		s.Close()
		t.Fatalf("the store in %s was opened", dir)
	}
	if !errors.Is(err, trust.ErrUntrusted) {
		t.Fatalf("%v: not ErrUntrusted", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%v: does not say %q", err, w)
		}
	}
}

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func noDB(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(dir, "db")); !os.IsNotExist(err) {
		t.Fatalf("db/ was written into the refused directory %s: %v", dir, err)
	}
}

func TestOpenStoreCreatesItsDirectory0700(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "store")
	s := openStore(t, dir, bridge.Fallback(), bridge.ChainPolicy{})
	s.Close()
	if m := modeOf(t, dir); m.Perm() != 0o700 || !m.IsDir() {
		t.Fatalf("mode %v", m)
	}
	// Ours and 0700: opened again as it is.
	s = openStore(t, dir, bridge.Fallback(), bridge.ChainPolicy{})
	s.Close()
}

func TestOpenStoreRefusesAnOpenDirectoryWithoutChangingIt(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o770, 0o730, os.ModeSticky | 0o777} {
		dir := filepath.Join(t.TempDir(), "store")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, mode)
		if mode&os.ModeSticky != 0 {
			refused(t, dir, "shared", "new directory of your own")
		} else {
			refused(t, dir, "chmod 700 "+dir, "new directory")
		}
		if m := modeOf(t, dir); m&(os.ModePerm|os.ModeSticky) != mode {
			t.Fatalf("mode %v: changed to %v", mode, m)
		}
		noDB(t, dir)
		if _, err := os.Lstat(filepath.Join(dir, "store.lock")); !os.IsNotExist(err) {
			t.Fatalf("mode %v: store.lock was made: %v", mode, err)
		}
	}
}

func TestOpenStoreTakesADirectoryOfOursAsItIs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	s := openStore(t, dir, bridge.Fallback(), bridge.ChainPolicy{})
	s.Close()
	if m := modeOf(t, dir); m.Perm() != 0o755 {
		t.Fatalf("the mode of a directory the store did not create was changed to %v", m)
	}
}

func TestOpenStoreRefusesTmp(t *testing.T) {
	// The world-writable /tmp (sticky, root's) is never made a store, nor chmodded.
	before := modeOf(t, os.TempDir())
	if before.Perm()&0o002 == 0 {
		t.Skipf("skipped: %s is not world-writable here", os.TempDir())
	}
	if before&os.ModeSticky != 0 {
		refused(t, os.TempDir(), "shared", "directory of your own")
	} else {
		refused(t, os.TempDir(), "chmod 700")
	}
	if after := modeOf(t, os.TempDir()); after != before {
		t.Fatalf("%s: mode %v became %v", os.TempDir(), before, after)
	}
}

func TestOpenStoreRefusesADirectoryOfAnotherUser(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	refused(t, dir, "belongs to uid 54321", "a directory of your own")
	noDB(t, dir)
}

func TestOpenStoreRefusesAParentOthersCanChange(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(parent, 0o777) // not sticky: anyone could rename the store directory away
	refused(t, filepath.Join(parent, "store"), "writable by every user")

	if os.Geteuid() == 0 {
		other := filepath.Join(t.TempDir(), "theirs")
		os.Mkdir(other, 0o755)
		os.Chown(other, otherUID, otherUID)
		refused(t, filepath.Join(other, "store"), "belongs to uid 54321")
	}
}

func TestOpenStoreRefusesASymlinkedLockAndLeavesItsTargetAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	os.Mkdir(dir, 0o700)
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "store.lock")); err != nil {
		t.Fatal(err)
	}
	refused(t, dir, "symbolic link", "remove it")
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Fatalf("the symlink's target was written: %q", b)
	}
	noDB(t, dir)

	// A hard link to another file is refused too (it would be truncated).
	os.Remove(filepath.Join(dir, "store.lock"))
	if err := os.Link(target, filepath.Join(dir, "store.lock")); err != nil {
		t.Fatal(err)
	}
	refused(t, dir, "hard links")
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Fatalf("the hard link's file was written: %q", b)
	}
}

func TestOpenStoreRefusesALockOfAnotherUserOrWritableByOthers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	os.Mkdir(dir, 0o700)
	lock := filepath.Join(dir, "store.lock")
	os.WriteFile(lock, []byte("1\n"), 0o600)
	os.Chmod(lock, 0o666)
	refused(t, dir, "other users can write")
	if os.Geteuid() == 0 {
		os.Chmod(lock, 0o600)
		os.Chown(lock, otherUID, otherUID)
		refused(t, dir, "belongs to uid 54321")
	}
	os.Remove(lock)
	s := openStore(t, dir, bridge.Fallback(), bridge.ChainPolicy{})
	s.Close()
}
