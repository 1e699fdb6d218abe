// Package proctest has helpers for tests that watch real processes.
package proctest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// PidAlive reports whether a process exists (and is not a zombie).
func PidAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}
