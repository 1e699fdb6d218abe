package control

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// gatedFS is the real disk with one gate: once armed, the next table file created (a flush's or
// a compaction's) waits until the test opens the gate.
type gatedFS struct {
	vfs.FS
	armed        atomic.Bool
	hit, release chan struct{}
}

func (f *gatedFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") && f.armed.CompareAndSwap(true, false) {
		close(f.hit)
		<-f.release
	}
	return f.FS.Create(name, cat)
}

// A deletion gives the disk back by compacting once it has let go of the server: compacting a
// large store takes seconds, and every other request (a command's first call, ls, the console)
// waited for it. Here the compaction is held at its first table while the server answers.
func TestADeletionsCompactionHoldsUpNothingElse(t *testing.T) {
	fs := &gatedFS{FS: vfs.Default, hit: make(chan struct{}), release: make(chan struct{})}
	db, err := store.OpenStore(filepath.Join(t.TempDir(), "store"), store.StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := NewServer(db, Config{Owner: "daemon"})
	for _, id := range []string{"a", "b"} {
		tk, err := task.Parse("t.yaml", []byte("id: "+id+"\nagent: A\nautonomy: 5\nworkspace: "+t.TempDir()+
			"\nagents:\n  A: {driver: script, script: {steps: {\"*\": [{output: done}]}}}\nplan: [{id: s, description: s, agent: A}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		h, err := srv.Manager().Create(tk)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
			t.Fatalf("harness %s: %v %s", id, err, h.Status())
		}
	}
	fs.armed.Store(true)
	type result struct {
		res DeleteResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := srv.Delete(context.Background(), "a", false)
		done <- result{res, err}
	}()
	select {
	case <-fs.hit:
	case r := <-done:
		close(fs.release)
		t.Fatalf("the deletion wrote no table: %+v %v", r.res, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the deletion's compaction did not start")
	}
	answered := make(chan error, 1)
	go func() {
		_, err := srv.Health(context.Background())
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(fs.release)
		t.Fatal("the server did not answer while a deletion compacted")
	}
	if _, err := db.Index("a"); err == nil {
		t.Fatal("harness a is still listed while its keys are compacted")
	}
	close(fs.release)
	r := <-done
	if r.err != nil || len(r.res.Harnesses) != 1 || r.res.Harnesses[0].ID != "a" || r.res.BytesAfter == 0 {
		t.Fatalf("the deletion: %+v %v", r.res, r.err)
	}
	if _, err := db.Index("b"); err != nil {
		t.Fatalf("harness b: %v", err)
	}
}
