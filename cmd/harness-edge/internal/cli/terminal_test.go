package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal and returns its controller and the terminal a child writes to.
func openPTY(t *testing.T) (controller, tty *os.File) {
	t.Helper()
	controller, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { controller.Close() })
	if err := unix.IoctlSetPointerInt(int(controller.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(controller.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return controller, tty
}

// runOnTerminal runs harness-edge with its standard output and error on a terminal and returns
// how it exited and what the terminal showed.
func runOnTerminal(t *testing.T, args ...string) (string, error) {
	t.Helper()
	controller, tty := openPTY(t)
	cmd := child(args...)
	cmd.Stdout, cmd.Stderr = tty, tty
	err := cmd.Run()
	tty.Close()
	var shown bytes.Buffer
	_, _ = shown.ReadFrom(controller) // ends with EIO once the child's terminal is closed
	return shown.String(), err
}

// run on a terminal shows the harness's progress as it goes (its steps starting and
// completing), as with --progress; in a pipe it stays quiet.
func TestRunShowsProgressOnATerminal(t *testing.T) {
	dir := t.TempDir()
	task := writeTask(t, dir, "mv.yaml", moveTask)
	shown, err := runOnTerminal(t, "--store", filepath.Join(dir, "a"), "run", task)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitWaiting {
		t.Fatalf("run on a terminal: %v\n%s", err, shown)
	}
	if !strings.Contains(shown, "> step prep (attempt 1)") || !strings.Contains(shown, "+ step prep completed") {
		t.Fatalf("run on a terminal showed no progress:\n%s", shown)
	}
	code, out := cli(t, "--store", filepath.Join(dir, "b"), "run", task)
	if code != ExitWaiting || strings.Contains(out, "> step prep") {
		t.Fatalf("run in a pipe: exit %d:\n%s", code, out)
	}
}
