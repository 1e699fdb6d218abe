// Package proc runs the subprocesses of tools and CLI agents: each in its own process group,
// killed whole when its context ends, with a clean environment and capped output.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CapWriter keeps the first Max bytes written to it and counts the rest.
type CapWriter struct {
	Max   int
	buf   bytes.Buffer
	total int
}

func (w *CapWriter) Write(p []byte) (int, error) {
	w.total += len(p)
	if room := w.Max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// String is what was kept.
func (w *CapWriter) String() string { return w.buf.String() }

// Truncated reports whether more was written than kept.
func (w *CapWriter) Truncated() bool { return w.total > w.buf.Len() }

// TailWriter keeps the last Max bytes written to it and counts the rest: for a CLI agent's
// output, whose answer (the promise, the result object of JSON lines) comes at its end.
type TailWriter struct {
	Max   int
	buf   []byte
	total int
}

func (w *TailWriter) Write(p []byte) (int, error) {
	w.total += len(p)
	if w.Max <= 0 {
		return len(p), nil
	}
	if len(p) >= w.Max {
		w.buf = append(w.buf[:0], p[len(p)-w.Max:]...)
		return len(p), nil
	}
	if len(w.buf)+len(p) > 2*w.Max { // drop the oldest bytes now and then, not on every write
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-(w.Max-len(p)):]...)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// String is what was kept: the last Max bytes, from the start of a line when more was written
// (a line cut at its start, a JSON document cut in half, is left out when a whole line follows).
func (w *TailWriter) String() string {
	b := w.buf[max(len(w.buf)-w.Max, 0):]
	if w.total > len(b) {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i+1 < len(b) {
			b = b[i+1:]
		}
	}
	return string(b)
}

// baseEnv are the variables every subprocess tool sees (when harness-edge has them).
var baseEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// CleanEnv is the environment of a subprocess tool: baseEnv and the tool's own list, nothing
// else (no API keys, tokens or credentials it was not given).
func CleanEnv(extra []string) []string {
	var env []string
	for _, k := range slices.Concat(baseEnv, extra) {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// ErrNotFound is LookPath's error: no executable by that name where the subprocess looks.
var ErrNotFound = errors.New("not found")

// LookPath finds the executable that a subprocess with the environment CleanEnv(extra) runs as
// name, so that a task can be checked before it runs. A name without a slash is searched in
// that environment's PATH (its absolute directories: exec refuses a match in a relative one);
// an absolute path must be an executable file; a relative path with a slash is resolved in the
// workspace when the command runs (the task may create it), so it is not checked and LookPath
// returns "".
func LookPath(name string, extra []string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", nil
		}
		if !executable(name) {
			return "", fmt.Errorf("%q is %w or not executable", name, ErrNotFound)
		}
		return name, nil
	}
	path := ""
	for _, kv := range CleanEnv(extra) {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if p := filepath.Join(dir, name); filepath.IsAbs(dir) && executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q was %w on PATH (%s)", name, ErrNotFound, path)
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

// hasTerminal says whether this process has a controlling terminal, which its children would
// share unless they start a session of their own.
func hasTerminal() bool {
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return !errors.Is(err, unix.ENXIO) // no terminal says ENXIO; in doubt, say there is one
	}
	unix.Close(fd)
	return true
}

// HideEnviron makes this process's memory and environment unreadable to the subprocesses it
// starts. Tools get a clean environment, but they run as the same user, and any process of that
// user may read /proc/PID/environ (and mem) of another: a bash tool could read the daemon's API
// keys through /proc/$PPID/environ. A process that is not "dumpable" (PR_SET_DUMPABLE 0) has its
// /proc files owned by root and refuses them to anyone without CAP_SYS_PTRACE; its children are
// dumpable again after exec, so nothing else changes for them. (It also turns off core dumps.)
// It cannot hide anything from a tool running as root, which may read any process's memory:
// run harness-edge as an ordinary user.
func HideEnviron() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// Run runs cmd in its own process group, which it kills whole when ctx ends and again when cmd
// exits (so nothing it started in the background outlives the call), and never with a
// controlling terminal. The calling goroutine's thread is locked while the child runs, so
// that Pdeathsig (sent when the thread that started the child exits) fires only when the
// process dies.
func Run(ctx context.Context, cmd *exec.Cmd) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	// Pdeathsig: if harness-edge itself dies (SIGKILL, power loss aside), the tool dies with it
	// instead of running on unobserved. (Its own children are not signalled: see killMarked.)
	// Setpgid: its own process group, whose id is its pid.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if hasTerminal() {
		// Its own session then (and so its own process group): one with no controlling
		// terminal, through which it could read harness-edge's or be stopped by it. (It can
		// still open the terminal's device by name, as any process of the user can.) Without
		// a terminal there is none to reach, and a session of its own would cost time: the
		// kernel gives each session its own scheduling group (autogroup), which added
		// 0.25-0.4 ms to every process that sleeps on the 2-CPU build machine.
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Setsid = false, true
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	err := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, exec.ErrWaitDelay) && ctx.Err() == nil {
		// cmd exited successfully, but something it left in the background still held its
		// output: cmd's work is done, and the leftover has just been killed with its group.
		err = nil
	}
	return err
}
