// Package trust decides whether a directory or a file in it can be trusted: it must be this
// user's, not writable by others, and reached without following a link another user planted.
// The store keeps its lock, the HTTP API's token and every task in its directory, and the
// owner runs what the tasks say, so both the store and the control plane check with it.
package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUntrusted is returned (wrapped, with what is wrong and what to do) for a store directory,
// or a file in it, that another user could have made or can change: the store keeps its lock,
// the HTTP API's token and every task there, and the owner runs what the tasks say.
var ErrUntrusted = errors.New("not a store directory this user can trust")

// Untrusted is an ErrUntrusted with its explanation.
func Untrusted(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUntrusted, fmt.Sprintf(format, args...))
}

// PrepareDir creates the store directory dir (mode 0700, parents too) unless it exists, and
// checks that it can be trusted (CheckDir). It never changes the mode of a directory it did
// not create.
func PrepareDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	err = os.Mkdir(abs, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(abs), 0o700); err == nil {
			err = os.Mkdir(abs, 0o700)
		}
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cannot create the store directory: %w", err)
	}
	return CheckDir(abs)
}

// CheckDir checks that the existing store directory dir can be trusted: it is a directory of
// this user (the effective uid) that no other user can write to (neither group- nor
// world-writable; its mode is left as it is), and no other user can replace it: every directory above it, and every symbolic link
// on the way, belongs to this user or to root, and none is writable by others unless it is
// sticky (as /tmp is). A directory that breaks a rule is refused with an error wrapping
// ErrUntrusted that says what to do; nothing is changed.
func CheckDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	uid := uint32(os.Geteuid())
	if err := checkAncestors(abs, uid); err != nil {
		return err
	}
	if fi, err := os.Lstat(abs); err != nil {
		return err
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		if o := OwnerOf(fi); o != uid && o != 0 {
			return Untrusted("%s is a symbolic link of uid %d, who could point it elsewhere: give --store the directory itself", abs, o)
		}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	if real != abs {
		if err := checkAncestors(real, uid); err != nil {
			return err
		}
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("the store directory %s is not a directory", abs)
	}
	if o := OwnerOf(fi); o != uid {
		return Untrusted("the store directory %s belongs to uid %d, not to this user (uid %d), who could have planted its lock or token: give --store a directory of your own (a new one is created with mode 0700)", abs, o, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 && fi.Mode()&fs.ModeSticky != 0 {
		return Untrusted("the store directory %s is shared (mode %04o, sticky, like /tmp): every user can put files in it: give --store a new directory of your own, such as %s (it is created with mode 0700)", abs, perm|0o1000, filepath.Join(abs, "harness-edge"))
	} else if perm&0o022 != 0 {
		return Untrusted("the store directory %s has mode %04o: other users can write to it, so they could plant the store's lock or token, and harness-edge does not change the mode of a directory it did not create: run `chmod 700 %s` if the directory is meant for the store, or give --store a new directory (it is created with mode 0700)", abs, perm, abs)
	}
	return nil
}

// checkAncestors checks every directory above path (not path itself): each belongs to uid or
// root and is not writable by others unless sticky, so no other user can replace what is below.
func checkAncestors(path string, uid uint32) error {
	for p := filepath.Dir(path); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if o := OwnerOf(fi); o != uid && o != 0 {
			return Untrusted("%s, above the store directory %s, belongs to uid %d, who could replace the store directory: put the store in a directory of your own", p, path, o)
		}
		if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return Untrusted("%s, above the store directory %s, is writable by every user (mode %04o, not sticky), who could replace the store directory: put the store in a directory of your own", p, path, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// OwnerOf is the uid that owns a file (all ones, nobody's, when the system does not say).
func OwnerOf(fi fs.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}

// CheckOwnFile checks an open file of the store directory (opened with O_NOFOLLOW) before the
// store trusts what it holds or writes to it: a regular file with one link, of this user, that
// no other user can write; with secret, that no other user can read either. what names it in
// the error, which wraps ErrUntrusted and says what to do.
func CheckOwnFile(f *os.File, what string, secret bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return Untrusted("%s %s is not a regular file: remove it", what, f.Name())
	case !ok || st.Uid != uint32(os.Geteuid()):
		return Untrusted("%s %s belongs to uid %d, not to this user (uid %d): remove it, and check who else could write to the store directory", what, f.Name(), OwnerOf(fi), os.Geteuid())
	case st.Nlink != 1:
		return Untrusted("%s %s has %d hard links, so it is another file's too: remove it", what, f.Name(), st.Nlink)
	case secret && fi.Mode().Perm()&0o077 != 0:
		return Untrusted("%s %s has mode %04o: other users can read it: remove it (a new one is made with mode 0600)", what, f.Name(), fi.Mode().Perm())
	case fi.Mode().Perm()&0o022 != 0:
		return Untrusted("%s %s has mode %04o: other users can write it: remove it (a new one is made with mode 0600)", what, f.Name(), fi.Mode().Perm())
	}
	return nil
}

// openNoFollow opens path with O_NOFOLLOW, saying what to do when it is a symbolic link.
func openNoFollow(path, what string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, Untrusted("%s %s is a symbolic link, which the store never follows: remove it", what, path)
	}
	return f, err
}

// OpenOwnFile opens path with O_NOFOLLOW and checks it (CheckOwnFile).
func OpenOwnFile(path, what string, flag int, perm os.FileMode, secret bool) (*os.File, error) {
	f, err := openNoFollow(path, what, flag, perm)
	if err != nil {
		return nil, err
	}
	if err := CheckOwnFile(f, what, secret); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
