// Package itlog keeps the live output of a CLI agent's iterations: one bounded log file per
// iteration, under the store directory, that `harness-edge logs` prints and follows while the
// iteration runs.
//
// The logs are plain files, not records in the store: they are written as the agent prints,
// many times a second, and read while being written; a checkpoint store would turn each line
// into a synced write and keep every byte of it in the harness's chain. They are a view, not
// state: nothing the harness decides depends on them, and losing them loses no progress.
//
// Layout: DIR/HARNESS/STEP/N.log, where N is the iteration. Each file holds what the iteration
// wrote on stdout and stderr, as it came, after a header line; a run of the iteration cut short
// by a crash is followed, in the same file, by the run that repeats it. Bounds: when a file
// reaches MaxBytes it is renamed N.log.1 (replacing the one before) and a new N.log starts, so an
// iteration keeps at most 2 × MaxBytes, the newest; a step keeps the logs of its Keep newest
// iterations, older ones are removed when a new iteration starts.
package itlog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// MaxBytes is the size at which an iteration's log file is rotated.
	MaxBytes = 4 << 20
	// Keep is how many iterations' logs a step keeps.
	Keep = 50
)

// DirName is the directory under the store directory that holds the logs.
const DirName = "logs"

// Dir is the log directory of the store in storeDir.
func Dir(storeDir string) string { return filepath.Join(storeDir, DirName) }

// safe makes an id a file name: characters other than letters, digits, '.', '_' and '-'
// become '_', and "." or ".." cannot result.
func safe(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	s := string(b)
	if s == "" || strings.Trim(s, ".") == "" {
		s = "_" + s
	}
	return s
}

// RemoveHarness deletes every iteration log of a harness (nothing to delete is fine).
func RemoveHarness(dir, harnessID string) error {
	return os.RemoveAll(filepath.Join(dir, safe(harnessID)))
}

func stepDir(dir, harnessID, stepID string) string {
	return filepath.Join(dir, safe(harnessID), safe(stepID))
}

func fileName(n int) string { return strconv.Itoa(n) + ".log" }

// Writer is an iteration's log, open for writing; stdout and stderr may write to it at once.
type Writer struct {
	mu   sync.Mutex
	path string
	f    *os.File
	size int64
	max  int64
	err  error
}

// Open opens iteration n's log of a step for appending (creating it and its directories),
// writes header as a line, and removes the logs of the step's iterations older than the Keep
// newest.
func Open(dir, harnessID, stepID string, n int, header string) (*Writer, error) {
	sd := stepDir(dir, harnessID, stepID)
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return nil, fmt.Errorf("iteration log: %w", err)
	}
	prune(sd, n)
	w := &Writer{path: filepath.Join(sd, fileName(n)), max: MaxBytes}
	if err := w.open(); err != nil {
		return nil, err
	}
	if header != "" {
		_, _ = w.Write([]byte(header + "\n"))
	}
	return w, w.err
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("iteration log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("iteration log: %w", err)
	}
	w.f, w.size = f, fi.Size()
	return nil
}

// Write appends p, rotating the file first when p would take it over MaxBytes. A log that
// cannot be written is given up quietly (the iteration goes on; its output is still captured
// for the loop): Write never fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil || w.err != nil {
		return len(p), nil
	}
	if w.size > 0 && w.size+int64(len(p)) > w.max {
		w.f.Close()
		w.f = nil
		if err := os.Rename(w.path, w.path+".1"); err != nil {
			w.err = err
			return len(p), nil
		}
		if err := w.open(); err != nil {
			w.err = err
			return len(p), nil
		}
	}
	if len(p) > int(w.max) { // one write bigger than a file: its end
		p = p[len(p)-int(w.max):]
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	if err != nil {
		w.err = err
	}
	return len(p), nil
}

// Close writes trailer as a line and closes the file.
func (w *Writer) Close(trailer string) error {
	if trailer != "" {
		_, _ = w.Write([]byte(trailer + "\n"))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return w.err
	}
	err := w.f.Close()
	w.f = nil
	return errors.Join(w.err, err)
}

// prune removes the logs of the step's iterations that are not among the Keep newest once
// iteration n exists.
func prune(sd string, n int) {
	its := iterations(sd)
	if len(its) == 0 {
		return
	}
	for _, old := range its {
		if old <= n-Keep {
			os.Remove(filepath.Join(sd, fileName(old)))
			os.Remove(filepath.Join(sd, fileName(old)+".1"))
		}
	}
}

// iterations lists the iterations a step directory holds logs of, in order.
func iterations(sd string) []int {
	entries, _ := os.ReadDir(sd)
	var its []int
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(name); err == nil && n > 0 {
			its = append(its, n)
		}
	}
	sort.Ints(its)
	return its
}

// Iteration names one iteration's log.
type Iteration struct {
	Step      string    `json:"step"`
	Iteration int       `json:"iteration"`
	Modified  time.Time `json:"modified"`
	path      string
}

// List lists a harness's iteration logs, oldest first (by when they were last written).
func List(dir, harnessID string) ([]Iteration, error) {
	hd := filepath.Join(dir, safe(harnessID))
	steps, err := os.ReadDir(hd)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Iteration
	for _, s := range steps {
		if !s.IsDir() {
			continue
		}
		sd := filepath.Join(hd, s.Name())
		for _, n := range iterations(sd) {
			p := filepath.Join(sd, fileName(n))
			fi, err := os.Stat(p)
			if err != nil {
				continue
			}
			out = append(out, Iteration{Step: s.Name(), Iteration: n, Modified: fi.ModTime(), path: p})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Modified.Before(out[j].Modified) })
	return out, nil
}

// ErrNoLogs says that a harness has no iteration logs (or not the one asked for).
var ErrNoLogs = errors.New("no iteration logs")

// Query says which log to print.
type Query struct {
	// Iteration is the iteration (0: the newest).
	Iteration int
	// Follow goes on printing what is written, and the logs of the iterations that start
	// after, while the harness runs.
	Follow bool
	// Poll is how often a followed log is looked at again (default 100 ms).
	Poll time.Duration
}

// Print writes a harness's iteration log to w: iteration q.Iteration's (the newest when 0, of
// the step that wrote it last), the rotated part first. With q.Follow it goes on: it writes
// what is appended to that log, and when a newer iteration's log appears, it goes on with that
// one; it returns once running reports false and everything written is printed (nil), or when
// ctx ends (ctx's error).
func Print(ctx context.Context, dir, harnessID string, q Query, running func() bool, w io.Writer) error {
	poll := q.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	// pick finds iteration n's log (the newest when 0).
	pick := func(n int) (Iteration, bool) {
		its, _ := List(dir, harnessID)
		for i := len(its) - 1; i >= 0; i-- {
			if n == 0 || its[i].Iteration == n {
				return its[i], true
			}
		}
		return Iteration{}, false
	}
	cur, ok := pick(q.Iteration)
	for !ok {
		if !q.Follow || !running() {
			if q.Iteration > 0 {
				return fmt.Errorf("%w: harness %s has no log of iteration %d (only command agents' iterations have logs, and a step keeps its %d newest)", ErrNoLogs, harnessID, q.Iteration, Keep)
			}
			return fmt.Errorf("%w: harness %s has none yet (only command agents' iterations have logs)", ErrNoLogs, harnessID)
		}
		if err := sleep(ctx, poll); err != nil {
			return err
		}
		cur, ok = pick(q.Iteration)
	}
	for {
		if err := copyFile(cur.path+".1", w); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		next, err := follow(ctx, cur, q.Follow, poll, running, func() (Iteration, bool) { return pick(0) }, w)
		if err != nil || next == nil {
			return err
		}
		cur = *next
	}
}

func copyFile(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// follow prints cur's log; following, it waits for more until the harness stops running (nil)
// or another iteration's log is the newest (that one).
func follow(ctx context.Context, cur Iteration, following bool, poll time.Duration, running func() bool, newest func() (Iteration, bool), w io.Writer) (*Iteration, error) {
	f, err := os.Open(cur.path)
	if err != nil {
		return nil, err
	}
	defer func() { f.Close() }()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		if _, err := io.Copy(w, r); err != nil {
			return nil, err
		}
		if !following {
			return nil, nil
		}
		// Decide before the last read: what was written before the check is printed.
		alive := running()
		if fi, err := os.Stat(cur.path); err == nil {
			if held, err := f.Stat(); err == nil && !os.SameFile(fi, held) { // rotated
				if _, err := io.Copy(w, r); err != nil {
					return nil, err
				}
				f.Close()
				if f, err = os.Open(cur.path); err != nil {
					return nil, err
				}
				r.Reset(f)
				continue
			}
		}
		if next, ok := newest(); ok && next.path != cur.path {
			if _, err := io.Copy(w, r); err != nil {
				return nil, err
			}
			return &next, nil
		}
		if !alive {
			_, err := io.Copy(w, r)
			return nil, err
		}
		if err := sleep(ctx, poll); err != nil {
			return nil, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
