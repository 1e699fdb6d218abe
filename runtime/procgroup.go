package runtime

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// A process group left behind by a harness that was killed: Pdeathsig kills the process
// harness-edge started, not what that process started in turn (a CLI agent's own tools and
// servers). Before an iteration cut short by a crash runs again, the survivors of its group
// are killed, or two agents would work on one workspace.

// ProcRef names a process group durably: its id, the session it ran in and its leader's start
// time (clock ticks since boot), so that an unrelated group that reuses the id is left alone.
type ProcRef struct {
	PGID    int    `json:"pgid"`
	Session int    `json:"sid"`
	Start   uint64 `json:"start"`
}

// procStat reads a process's group, session and start time from /proc/PID/stat; ok is false for
// a process that is gone or a zombie.
func procStat(pid int) (pgrp, sid int, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 || f[0] == "Z" {
		return 0, 0, 0, false
	}
	pgrp, _ = strconv.Atoi(f[2])
	sid, _ = strconv.Atoi(f[3])
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return pgrp, sid, start, true
}

// refOf describes the process group a just-started process leads.
func refOf(pid int) *ProcRef {
	_, sid, start, ok := procStat(pid)
	if !ok {
		return nil
	}
	return &ProcRef{PGID: pid, Session: sid, Start: start}
}

// killStaleGroup kills what is left of a recorded process group: the processes in that group and
// session that started no earlier than its leader. It returns how many it signalled.
func killStaleGroup(ref *ProcRef) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pgrp, sid, start, ok := procStat(pid); ok && pgrp == ref.PGID && sid == ref.Session && start >= ref.Start {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}
