// Package reexec starts the running test binary again as a child process, for tests that need
// a real process to kill with SIGKILL. The test's TestMain picks the child's part by an
// environment variable that only the child has.
package reexec

import (
	"os"
	"os/exec"
	"strings"
)

// Command returns a command that runs this test binary again with name=value added to its
// environment. Under emulation (cross/qemu-run sets HARNESS_EDGE_EXEC_WRAPPER) the child runs
// through the same wrapper as the parent.
func Command(name, value string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	if w := strings.Fields(os.Getenv("HARNESS_EDGE_EXEC_WRAPPER")); len(w) > 0 {
		cmd = exec.Command(w[0], append(w[1:], os.Args[0])...)
	}
	cmd.Env = append(os.Environ(), name+"="+value)
	return cmd
}
