package tools

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
)

// bigSparse makes a sparse file of size bytes whose first lines are head.
func bigSparse(t *testing.T, p, head string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(head); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// allocated runs f and returns how many bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Reading a few lines of a huge file costs what those lines cost, not the file: lines are
// streamed, and the output (even one endless line) stops at the cap.
func TestReadFileIsBoundedOnHugeFiles(t *testing.T) {
	s := newSandbox(t)
	big := filepath.Join(s.ws, "big.log")
	bigSparse(t, big, "first\nsecond\nthird\n", 512<<20)
	var res statefmt.ToolResult
	if n := allocated(func() { res = s.run("read_file", map[string]any{"path": "big.log", "limit": 1}) }); n > 8<<20 {
		t.Fatalf("read_file limit 1 allocated %d bytes", n)
	}
	if !res.Success || res.Output != "first\n" {
		t.Fatalf("limit 1: %+v", res)
	}
	if n := allocated(func() { res = s.run("read_file", map[string]any{"path": "big.log", "offset": 3}) }); n > 8<<20 {
		t.Fatalf("read_file from line 3 (one endless line) allocated %d bytes", n)
	}
	if !res.Success || !res.Truncated || len(res.Output) != 64<<10 || !strings.HasPrefix(res.Output, "third\n") {
		t.Fatalf("offset 3: success=%v truncated=%v len=%d", res.Success, res.Truncated, len(res.Output))
	}
	res = s.run("read_file", map[string]any{"path": "notes.md", "offset": 2, "limit": 2})
	if !res.Success || res.Output != "beta\ngamma\n" {
		t.Fatalf("offset 2 limit 2: %+v", res)
	}
	if res := s.run("edit_file", map[string]any{"path": "big.log", "old": "first", "new": "1st"}); res.Success || !strings.Contains(res.Error, "more than edit_file loads") {
		t.Fatalf("edit_file on a huge file: %+v", res)
	}
	var out statefmt.ToolResult
	if n := allocated(func() { out = s.run("grep", map[string]any{"pattern": "second"}) }); n > 8<<20 {
		t.Fatalf("grep over a huge file allocated %d bytes", n)
	}
	if !out.Success || !strings.Contains(out.Output, "notes.md") && out.Output != "" {
		t.Fatalf("grep: %+v", out)
	}
}

// grep skips a line over MaxGrepLine and goes on with the lines after it, numbering them as
// they are in the file; a line of exactly MaxGrepLine bytes is matched whole, and a CRLF
// line is matched without its CR.
func TestGrepSkipsALongLineAndSearchesTheRest(t *testing.T) {
	s := newSandbox(t)
	content := "alpha\n" + strings.Repeat("needle ", MaxGrepLine/3) + "\n" + "needle after\r\n" +
		strings.Repeat("x", MaxGrepLine-len("needle")) + "needle\n" + "no match\n" + "last needle"
	if err := os.WriteFile(filepath.Join(s.ws, "long.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	var res statefmt.ToolResult
	if n := allocated(func() {
		res = s.run("grep", map[string]any{"pattern": "needle after|last needle|^needle", "path": "long.txt"})
	}); n > 8<<20 {
		t.Fatalf("grep over a file with a 2 MiB line allocated %d bytes", n)
	}
	if want := "long.txt:3:needle after\nlong.txt:6:last needle\n"; !res.Success || res.Output != want {
		t.Fatalf("grep: success=%v, output %d bytes, want %q: %.120q", res.Success, len(res.Output), want, res.Output)
	}
	// The line of exactly MaxGrepLine bytes (longer than the output's cap, so it is cut).
	res = s.run("grep", map[string]any{"pattern": "^x+needle$", "path": "long.txt"})
	if !res.Success || !strings.HasPrefix(res.Output, "long.txt:4:xxxx") {
		t.Fatalf("grep of the line of MaxGrepLine bytes: success=%v, output %.80q", res.Success, res.Output)
	}
}

// A cancelled call stops reading: a scan through a huge file ends with the context.
func TestReadFileIsCancellable(t *testing.T) {
	s := newSandbox(t)
	bigSparse(t, filepath.Join(s.ws, "big.log"), "", 1<<30)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "big.log", "offset": 1 << 30}},
		{"grep", map[string]any{"pattern": "x"}},
		{"glob", map[string]any{"pattern": "**/*"}},
	} {
		start := time.Now()
		res := runBuiltin(ctx, s.env, c.name, c.args)
		if res.Success || !strings.Contains(res.Error, "cancelled") || time.Since(start) > 2*time.Second {
			t.Errorf("%s with a cancelled context: %+v after %v", c.name, res, time.Since(start))
		}
	}
}

// FIFOs (and other special files) are refused at once instead of blocking the tool for ever,
// by every file tool, directly or through a symlink.
func TestFileToolsRefuseSpecialFiles(t *testing.T) {
	s := newSandbox(t)
	if err := syscall.Mkfifo(filepath.Join(s.ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pipe", filepath.Join(s.ws, "pipe-link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "pipe"}},
		{"read_file", map[string]any{"path": "pipe-link"}},
		{"write_file", map[string]any{"path": "pipe", "content": "x"}},
		{"write_file", map[string]any{"path": "pipe-link", "content": "x"}},
		{"edit_file", map[string]any{"path": "pipe", "old": "a", "new": "b"}},
		{"grep", map[string]any{"pattern": "beta"}},
	} {
		done := make(chan statefmt.ToolResult, 1)
		go func() { done <- s.run(c.name, c.args) }()
		select {
		case res := <-done:
			if c.name == "grep" {
				if !res.Success || !strings.Contains(res.Output, "notes.md:2:beta") {
					t.Errorf("grep beside a FIFO: %+v", res)
				}
				continue
			}
			if res.Success || !strings.Contains(res.Error, "not a regular file") {
				t.Errorf("%s %v: %+v", c.name, c.args, res)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %v blocked on a FIFO", c.name, c.args)
		}
	}
}
