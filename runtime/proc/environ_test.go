package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
		cmd := exec.CommandContext(context.Background(), "bash", "-c", `cat /proc/$PPID/environ | tr '\0' '\n'; cat /proc/$PPID/mem 2>&1 | head -c 100; echo; ps -o sid= -p $$; ps -o sid= -p $PPID`)
		cmd.Env = CleanEnv(nil)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err := Run(context.Background(), cmd)
		fmt.Print(out.String())
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

// A bash tool cannot read the secrets in harness-edge's environment through /proc, and runs in
// a session of its own.
func TestToolsCannotReadTheParentsEnvironment(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "HARNESS_EDGE_PROC_HELPER=1", secretVar+"=sk-live-hunter2")
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
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	// Under emulation (cross/qemu-run) the host cannot exec this binary itself: the emulator
	// runs it, as it runs the test.
	if w := strings.Fields(os.Getenv("HARNESS_EDGE_EXEC_WRAPPER")); len(w) > 0 {
		cmd.Args = append(append([]string{w[0]}, w[1:]...), append([]string{cmd.Path}, cmd.Args[1:]...)...)
		cmd.Path = w[0]
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "hunter2") {
		t.Fatalf("the tool read the parent's secret:\n%s", out)
	}
	if !strings.Contains(string(out), "exit: <nil>") {
		t.Fatalf("the tool did not run:\n%s", out)
	}
	f := strings.Fields(string(out))
	if len(f) < 4 || f[len(f)-4] == f[len(f)-3] {
		t.Fatalf("the tool runs in harness-edge's session:\n%s", out)
	}
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
