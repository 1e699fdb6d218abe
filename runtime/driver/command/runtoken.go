package command

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"syscall"
)

// What a killed iteration left running. Pdeathsig kills the process harness-edge started when
// harness-edge dies, not what that process started in turn (a CLI agent's own tools and
// servers). Before an iteration cut short by a crash runs again, its survivors are killed, or
// two agents would work on one workspace. They are found by a token in their environment
// (inherited by everything the iteration starts), saved before the iteration starts: no window
// in which a crash leaves processes nobody knows of.

// runTokenVar is the environment variable that marks an iteration's processes.
const runTokenVar = "HARNESS_EDGE_RUN"

// newRunToken makes a token for one iteration.
func newRunToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// killMarked kills every process of this user whose environment holds the token, but those of
// process group spare (already killed, perhaps still exiting; 0 spares none), and returns how
// many it signalled.
func killMarked(token string, spare int) int {
	mark := []byte(runTokenVar + "=" + token + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append(env, 0), mark) {
			continue
		}
		if pg, err := syscall.Getpgid(pid); spare != 0 && err == nil && pg == spare {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
