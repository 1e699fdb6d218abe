package itlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriterRotatesAtMaxBytesKeepingTheNewest(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, "h1", "s", 1, "=== head ===")
	if err != nil {
		t.Fatal(err)
	}
	w.max = 100
	for i := range 30 {
		if _, err := w.Write([]byte(strings.Repeat(string(rune('a'+i%26)), 9) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close("=== tail ==="); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "h1", "s", "1.log")
	cur, _ := os.ReadFile(p)
	old, _ := os.ReadFile(p + ".1")
	if len(cur) > 100 || len(old) > 100 || len(old) == 0 {
		t.Fatalf("sizes %d and %d, want each at most 100", len(cur), len(old))
	}
	if !strings.HasSuffix(string(cur), "=== tail ===\n") || strings.Contains(string(old)+string(cur), "=== head") {
		t.Fatalf("the newest output must stay, the oldest go:\n%s---\n%s", old, cur)
	}
	var b bytes.Buffer
	if err := Print(context.Background(), dir, "h1", Query{Iteration: 1}, func() bool { return false }, &b); err != nil {
		t.Fatal(err)
	}
	if b.String() != string(old)+string(cur) {
		t.Fatalf("Print gave %q, want the rotated part and then the current one", b.String())
	}
}

func TestOpenKeepsTheNewestIterations(t *testing.T) {
	dir := t.TempDir()
	for n := 1; n <= Keep+3; n++ {
		w, err := Open(dir, "h", "s", n, "")
		if err != nil {
			t.Fatal(err)
		}
		w.Close("")
	}
	its, err := List(dir, "h")
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != Keep || its[0].Iteration != 4 || its[len(its)-1].Iteration != Keep+3 {
		t.Fatalf("%d logs kept, from %d to %d; want the %d newest", len(its), its[0].Iteration, its[len(its)-1].Iteration, Keep)
	}
}

func TestPrintSaysWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	stopped := func() bool { return false }
	err := Print(context.Background(), dir, "none", Query{}, stopped, &bytes.Buffer{})
	if !errors.Is(err, ErrNoLogs) || !strings.Contains(err.Error(), "harness none has none yet") {
		t.Fatalf("err %v", err)
	}
	w, _ := Open(dir, "h", "s", 1, "x")
	w.Close("")
	err = Print(context.Background(), dir, "h", Query{Iteration: 7}, stopped, &bytes.Buffer{})
	if !errors.Is(err, ErrNoLogs) || !strings.Contains(err.Error(), "no log of iteration 7") {
		t.Fatalf("err %v", err)
	}
}

// Odd ids never reach outside the log directory.
func TestIDsStayInsideTheDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"..", ".", "../x", "a/b", ""} {
		w, err := Open(filepath.Join(dir, "logs"), id, id, 1, "x")
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		w.Close("")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "logs" {
		t.Fatalf("files outside the log directory: %v", entries)
	}
}

// Following prints what is written as it is written, goes on with the next iteration, and
// ends once the harness stops running.
func TestFollowStreamsAndMovesOnToTheNextIteration(t *testing.T) {
	dir := t.TempDir()
	w1, _ := Open(dir, "h", "s", 1, "=== one ===")
	var alive atomic.Bool
	alive.Store(true)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Print(context.Background(), dir, "h", Query{Follow: true, Poll: 5 * time.Millisecond}, alive.Load, out)
	}()
	waitFor(t, out, "=== one ===\n")
	w1.Write([]byte("first line\n"))
	waitFor(t, out, "first line\n")
	w1.max = 30 // rotate while followed
	w1.Write([]byte(strings.Repeat("x", 25) + "\n"))
	waitFor(t, out, strings.Repeat("x", 25)+"\n")
	w1.Close("=== one ended ===")
	time.Sleep(20 * time.Millisecond)
	w2, _ := Open(dir, "h", "s", 2, "=== two ===")
	w2.Write([]byte("second\n"))
	w2.Close("=== two ended ===")
	alive.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end when the harness stopped")
	}
	want := "=== one ===\nfirst line\n" + strings.Repeat("x", 25) + "\n=== one ended ===\n=== two ===\nsecond\n=== two ended ===\n"
	if out.String() != want {
		t.Fatalf("followed %q\nwant     %q", out.String(), want)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, b *syncBuffer, suffix string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasSuffix(b.String(), suffix) {
		if time.Now().After(deadline) {
			t.Fatalf("never printed %q; printed %q", suffix, b.String())
		}
		time.Sleep(time.Millisecond)
	}
}
