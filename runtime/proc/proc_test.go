package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/proctest"
)

// A tool dies with the harness-edge process that ran it, killed with SIGKILL (no chance to
// clean up): it does not run on, unobserved.
func TestAToolDiesWithTheProcessThatRanIt(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "tool.pid")
	parent := exec.Command(exe, "-test.run=^$")
	parent.Env = append(os.Environ(), "HARNESS_EDGE_PROC_ORPHAN="+pidFile)
	// Under emulation (cross/qemu-run) the host cannot exec this binary itself: the emulator
	// runs it, as it runs the test, and is the process killed.
	if w := strings.Fields(os.Getenv("HARNESS_EDGE_EXEC_WRAPPER")); len(w) > 0 {
		parent.Args = append(append([]string{w[0]}, w[1:]...), append([]string{parent.Path}, parent.Args[1:]...)...)
		parent.Path = w[0]
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = parent.Process.Kill()
			t.Fatal("the tool did not start")
		}
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if !alive(pid) {
		t.Fatalf("the tool (pid %d) is not running before the kill", pid)
	}
	_ = parent.Process.Signal(syscall.SIGKILL)
	_ = parent.Wait()
	for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the tool (pid %d) outlived the process that ran it by 5 s", pid)
		}
	}
}

// alive says whether pid runs (a zombie, dead but not yet reaped, does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// Threads come and go under a child: a goroutine that ends locked to its thread ends the thread,
// and Pdeathsig fires when the child's parent thread ends, not the process. Children started by
// Run live through any number of such ends.
func TestAToolOutlivesTheThreadsOfOtherGoroutines(t *testing.T) {
	var wg sync.WaitGroup
	errs := make([]error, 4)
	outs := make([]strings.Builder, 4)
	for i := range errs {
		wg.Go(func() {
			cmd := exec.CommandContext(context.Background(), "sh", "-c", "sleep 0.5; echo ok")
			cmd.Env = CleanEnv(nil)
			cmd.Stdout = &outs[i]
			errs[i] = Run(context.Background(), cmd)
		})
	}
	// Meanwhile, end threads: each goroutine locks itself to the thread it runs on and returns.
	stop := time.Now().Add(400 * time.Millisecond)
	for time.Now().Before(stop) {
		var ends sync.WaitGroup
		for range 16 {
			ends.Go(func() {
				runtime.LockOSThread()
				time.Sleep(time.Millisecond)
			})
		}
		ends.Wait()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || outs[i].String() != "ok\n" {
			t.Fatalf("tool %d: %v, output %q (want ok): killed with its parent thread", i, err, outs[i].String())
		}
	}
}

// A TailWriter keeps the last Max bytes however they were written, from a line's start once
// it had to drop some.
func TestTailWriterKeepsTheEnd(t *testing.T) {
	for _, chunk := range []int{1, 3, 7, 100} {
		w := &TailWriter{Max: 16}
		all := "first line\nsecond line\nthird\nlast <promise>X</promise>\n"
		for s := all; s != ""; {
			n := min(chunk, len(s))
			w.Write([]byte(s[:n]))
			s = s[n:]
		}
		if got := w.String(); got != all[len(all)-16:] { // no line starts in the last 16 bytes
			t.Fatalf("chunks of %d: %q", chunk, got)
		}
		w = &TailWriter{Max: 32}
		for s := all; s != ""; {
			n := min(chunk, len(s))
			w.Write([]byte(s[:n]))
			s = s[n:]
		}
		if got := w.String(); got != "last <promise>X</promise>\n" {
			t.Fatalf("chunks of %d, max 32: %q", chunk, got)
		}
	}
	w := &TailWriter{Max: 64}
	w.Write([]byte("short\n"))
	if got := w.String(); got != "short\n" {
		t.Fatalf("under the limit: %q", got)
	}
}

// A command that exits successfully while something it left in the background still holds its
// output (an agent that starts a server) has succeeded: Run returns what the command did, and
// the leftover dies with its process group.
func TestRunSucceedsWhenALeftoverHoldsTheOutput(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "leftover.pid")
	var out strings.Builder
	cmd := exec.CommandContext(context.Background(), "sh", "-c", `sleep 60 & echo $! > "$0"; echo answer`, pidFile)
	cmd.Stdout = &out
	if err := Run(context.Background(), cmd); err != nil {
		t.Fatalf("run: %v", err)
	}
	if out.String() != "answer\n" {
		t.Fatalf("output %q", out.String())
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for i := 0; proctest.PidAlive(pid); i++ {
		if i == 200 {
			t.Fatalf("the leftover %d outlived the command", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd = exec.CommandContext(context.Background(), "sh", "-c", `sleep 60 & exit 4`)
	cmd.Stdout = &out
	var ee *exec.ExitError
	if err := Run(context.Background(), cmd); !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("a failing command with a leftover: %v", err)
	}
}
