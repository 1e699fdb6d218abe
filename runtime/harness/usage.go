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

// statm is /proc/self/statm, opened once: steps read it (at most every rssFresh), and opening
// it each time cost more than reading it. Nil where /proc is missing.
var statm = sync.OnceValue(func() *os.File {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return nil
	}
	return f
})

// rssFresh is how long a reading of the resident memory serves: reading /proc/self/statm costs
// about 9 µs, a twentieth of a short step, and steps that end within rssFresh of each other
// report the same figure.
const rssFresh = 10 * time.Millisecond

// rss is the last reading of the resident memory and when it was made.
var rss rssReading

type rssReading struct {
	mu sync.Mutex
	at time.Time
	v  int64
}

// get is the reading, made again with read when it is older than rssFresh at now.
func (r *rssReading) get(now time.Time, read func() int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at.IsZero() || now.Sub(r.at) >= rssFresh || now.Before(r.at) {
		r.v, r.at = read(), now
	}
	return r.v
}

// rssBytes is this process's resident memory, read at most rssFresh ago (0 where /proc is
// missing).
func rssBytes() int64 { return rss.get(time.Now(), readRSS) }

// readRSS reads this process's resident memory now (0 where /proc is missing).
func readRSS() int64 {
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
