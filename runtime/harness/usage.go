package harness

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) this process and its waited-for children used.
func cpuTime() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}

// statm is /proc/self/statm, opened once: every step reads it, and opening it each time cost
// more than reading it. Nil where /proc is missing.
var statm = sync.OnceValue(func() *os.File {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return nil
	}
	return f
})

// rssBytes is this process's resident memory now (0 where /proc is missing).
func rssBytes() int64 {
	file := statm()
	if file == nil {
		return 0
	}
	var buf [128]byte
	n, err := file.ReadAt(buf[:], 0)
	if n == 0 || (err != nil && !errors.Is(err, io.EOF)) {
		return 0
	}
	f := bytes.Fields(buf[:n])
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
