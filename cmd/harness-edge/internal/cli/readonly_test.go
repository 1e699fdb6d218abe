package cli

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// dbFiles maps each file of the store's database to its size and SHA-256.
func dbFiles(t *testing.T, store string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "store.lock" { // the lock holds its taker's pid
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(store, p)
		files[rel] = fmt.Sprintf("%d %x", len(b), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// The commands that only read open a store no process owns read-only: they change none of its
// files (no new log, manifest or options file, no heads rewrite). A store that has no database
// yet is still made by them, as before.
func TestReadCommandsLeaveTheStoresFilesAsTheyWere(t *testing.T) {
	dir, store := t.TempDir(), t.TempDir()
	task := writeTask(t, dir, "t.yaml", daemonTask("rd", dir, 3, "1ms", false))
	if code, out, errOut := run(t, "--store", store, "run", task); code != ExitOK {
		t.Fatalf("run: exit %d: %s%s", code, out, errOut)
	}
	before := dbFiles(t, store)
	for _, args := range [][]string{
		{"ls"}, {"ls", "--json"}, {"show", "rd"}, {"show", "--json", "rd"}, {"events", "rd"}, {"events", "--json", "rd"},
		{"report"}, {"report", "--json"}, {"plan", "rd"}, {"checkpoints", "rd"}, {"inspect", "rd"}, {"verify"},
		{"export", "rd"}, {"metrics"},
	} {
		code, out, errOut := run(t, append([]string{"--store", store}, args...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s%s", args, code, out, errOut)
		}
		if after := dbFiles(t, store); !reflect.DeepEqual(after, before) {
			t.Fatalf("%v changed the store's files:\nbefore %v\nafter  %v", args, before, after)
		}
	}
	// A write still writes.
	if code, out, errOut := run(t, "--store", store, "checkpoint", "rd", "--name", "kept"); code != ExitOK {
		t.Fatalf("checkpoint: exit %d: %s%s", code, out, errOut)
	}
	if reflect.DeepEqual(dbFiles(t, store), before) {
		t.Fatal("a named checkpoint changed nothing in the store")
	}

	// A path that holds no store (mistyped, or nothing has run with it) is said to, and a
	// reader makes nothing there: not the directory, not an empty store to show.
	fresh := filepath.Join(t.TempDir(), "new-store")
	for _, args := range [][]string{{"ls"}, {"show", "rd"}, {"report"}, {"verify"}} {
		if code, out, errOut := run(t, append([]string{"--store", fresh}, args...)...); code != ExitError || !strings.Contains(errOut, fresh+" does not exist: no task has been run with it") {
			t.Fatalf("%v of a path with no store: exit %d: %q %s", args, code, out, errOut)
		}
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reading a path with no store made it: %v", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "--store", other, "ls"); code != ExitError || !strings.Contains(errOut, other+" holds no harness-edge store") {
		t.Fatalf("ls of a directory with no store: exit %d: %s", code, errOut)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 1 {
		t.Fatalf("ls of a directory with no store left %d entries there", len(entries))
	}
}
