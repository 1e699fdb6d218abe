package command

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A process of an iteration that execs as killMarked looks is found all the same: in the middle
// of an exec a process has no environment for a moment, and such a one (a shell's
// `exec sleep 60`) outlived its iteration. Here the marked process does nothing but exec itself
// again, so that a scan often meets it mid-exec.
func TestAProcessCaughtInTheMiddleOfAnExecIsFoundByItsToken(t *testing.T) {
	loop := `exec sh -c "$0" "$0"`
	for round := range 30 {
		token := newRunToken()
		cmd := exec.Command("sh", "-c", loop, loop)
		cmd.Env = append(os.Environ(), runTokenVar+"="+token)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // let it exec a few times
		n := killMarked(token, cmd.Process.Pid)
		if n != 1 {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("round %d: killMarked signalled %d processes, want the one exec'ing itself", round, n)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the process ended with %v, not killed", round, err)
		}
	}
}
