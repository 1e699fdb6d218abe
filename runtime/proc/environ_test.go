package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const secretVar = "HARNESS_EDGE_TEST_API_KEY"

// TestMain doubles as the helper process: a stand-in for harness-edge that holds a secret in its
// environment, hides it, and runs a bash tool as the tools run.
func TestMain(m *testing.M) {
	if os.Getenv("HARNESS_EDGE_PROC_HELPER") == "1" {
		if err := HideEnviron(); err != nil {
			fmt.Println("hide:", err)
			os.Exit(2)
		}
		cmd := exec.CommandContext(context.Background(), "bash", "-c", `cat /proc/$PPID/environ | tr '\0' '\n'; cat /proc/$PPID/mem 2>&1 | head -c 100; echo
echo "tool: $(ps -o sid=,pgid= -p $$)"; echo "parent: $(ps -o sid=,pgid= -p $PPID)"
if (exec 3</dev/tty) 2>/dev/null; then echo "tool terminal: true"; else echo "tool terminal: false"; fi`)
		cmd.Env = CleanEnv(nil)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err := Run(context.Background(), cmd)
		fmt.Print(out.String())
		fmt.Println("parent terminal:", hasTerminal())
		fmt.Println("exit:", err)
		os.Exit(0)
	}
	if pidFile := os.Getenv("HARNESS_EDGE_PROC_ORPHAN"); pidFile != "" {
		// A stand-in for harness-edge killed while its tool runs: the tool writes its pid and
		// sleeps; the test kills this process.
		cmd := exec.CommandContext(context.Background(), "sh", "-c", `echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 60`, "sh", pidFile)
		cmd.Env = CleanEnv(nil)
		fmt.Println("exit:", Run(context.Background(), cmd))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A bash tool cannot read the secrets in harness-edge's environment through /proc, runs in a
// process group of its own, and has no way to a terminal: harness-edge has none here, and the
// tool shares its session.
func TestToolsCannotReadTheParentsEnvironment(t *testing.T) {
	out := runHelper(t, nil)
	if strings.Contains(out, "hunter2") {
		t.Fatalf("the tool read the parent's secret:\n%s", out)
	}
	want(t, out, "parent terminal: false", "tool terminal: false")
	tool, parent := field(t, out, "tool: "), field(t, out, "parent: ")
	if tool[1] == parent[1] {
		t.Fatalf("the tool runs in harness-edge's process group:\n%s", out)
	}
}

// With a controlling terminal (harness-edge run from a shell), a tool runs in a session of its
// own, which has none: it cannot read harness-edge's terminal or be stopped by it.
func TestToolsHaveNoTerminalWhenHarnessEdgeHasOne(t *testing.T) {
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptm.Close()
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	out := runHelper(t, func(cmd *exec.Cmd) {
		cmd.Stdin = pts
		cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, 0
	})
	want(t, out, "parent terminal: true", "tool terminal: false")
	if tool, parent := field(t, out, "tool: "), field(t, out, "parent: "); tool[0] == parent[0] {
		t.Fatalf("the tool runs in harness-edge's session, which has a terminal:\n%s", out)
	}
}

// runHelper runs the test binary as a stand-in for harness-edge that runs one bash tool (see
// TestMain), in a session of its own with no terminal unless with makes it one, and returns
// what it printed.
func runHelper(t *testing.T, with func(*exec.Cmd)) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "HARNESS_EDGE_PROC_HELPER=1", secretVar+"=sk-live-hunter2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if os.Geteuid() == 0 {
		// Root may read any process's memory, whatever it sets: run the pair as nobody, from a
		// copy of the test binary that nobody can execute.
		dir, err := os.MkdirTemp("", "environ-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		copyExe := filepath.Join(dir, "helper")
		if err := copyFile(exe, copyExe); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{dir, copyExe} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd.Path, cmd.Args[0], cmd.Dir = copyExe, copyExe, dir
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	// Under emulation (cross/qemu-run) the host cannot exec this binary itself: the emulator
	// runs it, as it runs the test.
	if w := strings.Fields(os.Getenv("HARNESS_EDGE_EXEC_WRAPPER")); len(w) > 0 {
		cmd.Args = append(append([]string{w[0]}, w[1:]...), append([]string{cmd.Path}, cmd.Args[1:]...)...)
		cmd.Path = w[0]
	}
	if with != nil {
		with(cmd)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	want(t, string(out), "exit: <nil>")
	return string(out)
}

// want fails unless out has every line in lines.
func want(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !slices.Contains(strings.Split(out, "\n"), l) {
			t.Fatalf("want %q in the helper's output:\n%s", l, out)
		}
	}
}

// field returns the session and process group ids on the line that starts with prefix.
func field(t *testing.T, out, prefix string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				return f
			}
		}
	}
	t.Fatalf("no %q line with a session and a process group in the helper's output:\n%s", prefix, out)
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
