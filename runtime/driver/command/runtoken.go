package command

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// killMarked kills every process of this user whose environment holds the token and returns
// how many it signalled. leader, when not 0, is the pid of the iteration's first process, whose
// process group was killed already (its members, perhaps still exiting, are left alone): only
// processes started after it can be the iteration's, since pids are handed out in increasing
// order unless they wrapped around meanwhile (the kernel's last pid below leader), and the few
// pids handed out since are read one by one instead of listing /proc. (Reading every process's
// environment took 1.3-1.5 ms with 76 processes on the build machine, at every iteration's end.)
// With leader 0 (the processes of an iteration cut short by a crash) every process is read.
func killMarked(token string, leader int) int {
	mark := []byte(runTokenVar + "=" + token + "\x00")
	from := 0
	last, ok := lastPid()
	if leader > 0 && ok && last >= leader {
		from = leader
	}
	var pids []int
	if from > 0 && last-from <= 256 {
		for pid := from; pid <= last; pid++ {
			pids = append(pids, pid)
		}
	} else {
		names, err := readDirNames("/proc")
		if err != nil {
			return 0
		}
		for _, name := range names {
			if pid, err := strconv.Atoi(name); err == nil && pid >= from {
				pids = append(pids, pid)
			}
		}
	}
	n := 0
	buf := make([]byte, 64<<10)
	for _, pid := range pids {
		if pid == os.Getpid() {
			continue
		}
		env, err := environOf(pid, buf)
		if err != nil || !bytes.Contains(append(env, 0), mark) {
			continue
		}
		if pg, err := syscall.Getpgid(pid); leader != 0 && err == nil && pg == leader {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// environOf reads a process's environment. A process in the middle of an exec has none, or a
// part of one, for a moment (its old memory is going, its new one has no arguments and
// environment yet), and one of an iteration's processes that exec'd as the scan passed (a
// shell's `exec sleep 60`) was missed. The environment is read in one call, and read again, a
// few times a millisecond apart, while it is empty (unless the process is a kernel thread,
// which never has one) or does not end as a whole one does, with a NUL.
// buf is the caller's, reused from process to process.
func environOf(pid int, buf []byte) ([]byte, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/environ"
	for try := 0; ; try++ {
		env, err := readOnce(path, buf)
		if err != nil {
			return nil, err
		}
		whole := len(env) > 0 && env[len(env)-1] == 0
		if whole || try == 5 || (len(env) == 0 && kernelThread(pid)) {
			return env, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// readOnce reads the file at path with one read into buf (the whole file with os.ReadFile when
// it fills buf).
func readOnce(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Read(buf)
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if n == len(buf) {
		return os.ReadFile(path)
	}
	return buf[:n], nil
}

// kernelThread reports whether pid is a kernel thread (PF_KTHREAD in the flags of
// /proc/PID/stat, the ninth field, the seventh after the command name's parenthesis).
func kernelThread(pid int) bool {
	const pfKthread = 0x00200000
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfKthread != 0
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
