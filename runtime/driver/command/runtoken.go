package command

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
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
// many it signalled. With since > 0 (the pid of the iteration's first process) it looks only at
// processes started after it: pids are handed out in increasing order, so unless they wrapped
// around meanwhile (the kernel's last pid below since), an older pid cannot be the iteration's,
// and the few pids handed out since are read one by one instead of listing /proc. Reading every
// process's environment cost about 20 µs a process, 1.5 ms on a quiet machine at the end of every
// iteration.
func killMarked(token string, spare, since int) int {
	mark := []byte(runTokenVar + "=" + token + "\x00")
	var pids []int
	if last, ok := lastPid(); since > 0 && ok && last >= since && last-since <= 256 {
		for pid := since; pid <= last; pid++ {
			pids = append(pids, pid)
		}
	} else {
		names, err := readDirNames("/proc")
		if err != nil {
			return 0
		}
		for _, name := range names {
			if pid, err := strconv.Atoi(name); err == nil && (since <= 0 || !ok || last < since || pid >= since) {
				pids = append(pids, pid)
			}
		}
	}
	n := 0
	for _, pid := range pids {
		if pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
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

// readDirNames lists a directory's names, unsorted.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// lastPid is the pid the kernel handed out last (in this pid namespace).
func lastPid() (int, bool) {
	b, err := os.ReadFile("/proc/sys/kernel/ns_last_pid")
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil
}
