package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// A harness holds its workspace while it runs: an flock(2) on a lock file beside the workspace
// directory (".NAME.harness-edge.lock" in its parent, where the agents' file tools cannot reach
// it and a git work tree does not see it). The kernel lets go of the lock when its process
// dies, however it dies, so a crashed holder's lock is simply taken by the next harness; a live
// holder's is not. The file says who holds it (harness id, pid, since when), for the message
// that refuses a second harness. Exclusive holders write; read-only holders share the lock.

// ErrWorkspaceBusy matches a *WorkspaceBusyError.
var ErrWorkspaceBusy = errors.New("workspace in use")

// WorkspaceHolder is what the lock file says about the harness holding a workspace.
type WorkspaceHolder struct {
	HarnessID string    `json:"harnessId"`
	PID       int       `json:"pid"`
	Mode      string    `json:"mode"` // task.SharedExclusive or task.SharedReadOnly
	Since     time.Time `json:"since"`
}

func (w WorkspaceHolder) String() string {
	s := fmt.Sprintf("harness %s (pid %d", w.HarnessID, w.PID)
	if w.HarnessID == "" {
		s = fmt.Sprintf("a task run without a harness id yet (pid %d", w.PID)
	}
	if w.Mode == task.SharedReadOnly {
		s += ", read-only"
	}
	if !w.Since.IsZero() {
		s += ", since " + w.Since.UTC().Format(time.RFC3339)
	}
	return s + ")"
}

// WorkspaceBusyError refuses a harness the workspace of which another one holds.
type WorkspaceBusyError struct {
	Workspace string
	// Holder is what the lock file says (zero when it says nothing readable).
	Holder   WorkspaceHolder
	LockFile string
}

func (e *WorkspaceBusyError) Error() string {
	holder := "another harness"
	if e.Holder.PID != 0 {
		holder = e.Holder.String()
	}
	return fmt.Sprintf("workspace %s is in use by %s, lock file %s: run this task when that one has finished, give it another workspace, or submit it to the daemon, which waits for the workspace",
		e.Workspace, holder, e.LockFile)
}

func (e *WorkspaceBusyError) Is(target error) bool { return target == ErrWorkspaceBusy }

// WorkspaceLockFile is the lock file of a workspace directory.
func WorkspaceLockFile(workspace string) (string, error) {
	ws := filepath.Clean(workspace)
	parent, base := filepath.Dir(ws), filepath.Base(ws)
	if parent == ws || base == "." || base == string(filepath.Separator) {
		return "", fmt.Errorf("workspace %s: it has no parent directory to keep its lock file in", workspace)
	}
	return filepath.Join(parent, "."+base+".harness-edge.lock"), nil
}

// WorkspaceLock is a held workspace. Release lets it go (once; later calls do nothing).
type WorkspaceLock struct {
	mu        sync.Mutex
	f         *os.File
	workspace string
	holder    WorkspaceHolder
}

// LockWorkspace takes a task's workspace for a harness (harnessID may be empty for one about
// to be created: Harness.UseWorkspaceLock names it later). It creates the workspace directory
// when missing. An isolated task's worktree is its harness's own: there is nothing to lock
// before the harness exists (nil, nil). A workspace another live process (or another harness
// of this one) holds is refused with a *WorkspaceBusyError after lockGrace: nothing waits for
// its holder.
func LockWorkspace(t *task.Task, harnessID string) (*WorkspaceLock, error) {
	if t.Workspace.Isolated() && t.Workspace.Path == "" {
		return nil, nil // its worktree is its own, named when the harness is created
	}
	ws, err := filepath.Abs(t.Workspace.Path)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	lockPath, err := WorkspaceLockFile(ws)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	mode, how := task.SharedExclusive, syscall.LOCK_EX
	if t.Workspace.ReadOnly() {
		mode, how = task.SharedReadOnly, syscall.LOCK_SH
	}
	for range 10 { // the file can be removed between the open and the lock: then again
		f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("workspace %s: its lock file: %w", ws, err)
		}
		if err := tryFlock(f, how); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &WorkspaceBusyError{Workspace: ws, Holder: readHolder(lockPath), LockFile: lockPath}
			}
			return nil, fmt.Errorf("workspace %s: locking %s: %w", ws, lockPath, err)
		}
		if !sameFile(f, lockPath) {
			f.Close()
			continue
		}
		l := &WorkspaceLock{f: f, workspace: ws, holder: WorkspaceHolder{HarnessID: harnessID, PID: os.Getpid(), Mode: mode, Since: time.Now().UTC()}}
		l.write()
		return l, nil
	}
	return nil, fmt.Errorf("workspace %s: its lock file %s keeps being replaced", ws, lockPath)
}

// lockGrace is how long a lock that is held is tried again before the workspace is called busy.
// A lock let go of is not always free at once: a subprocess this process is starting (any
// tool's) shares its open files between its fork and its exec, the lock's among them (the
// descriptor closes on exec), and under load that can take milliseconds.
const lockGrace = 250 * time.Millisecond

// tryFlock takes the lock without waiting for a holder, but rides out lockGrace.
func tryFlock(f *os.File, how int) error {
	deadline := time.Now().Add(lockGrace)
	for {
		err := flock(f, how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// sameFile reports whether the open file is still the one at path (not removed or replaced).
func sameFile(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// write records the holder in the lock file. Best effort: the lock is the flock, the content
// only names who holds it.
func (l *WorkspaceLock) write() {
	b, _ := json.Marshal(l.holder)
	b = append(b, '\n')
	if info, err := l.f.Stat(); l.holder.Mode == task.SharedReadOnly && (err != nil || info.Size() > 0) {
		return // readers share the file: the record of one of them is enough
	}
	_ = l.f.Truncate(0)
	_, _ = l.f.WriteAt(b, 0)
}

// readHolder reads what a lock file says about its holder (zero when unreadable).
func readHolder(path string) WorkspaceHolder {
	var w WorkspaceHolder
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 4096 {
		return WorkspaceHolder{}
	}
	if json.Unmarshal([]byte(strings.TrimSpace(string(b))), &w) != nil {
		return WorkspaceHolder{}
	}
	return w
}

// Workspace is the directory the lock holds.
func (l *WorkspaceLock) Workspace() string { return l.workspace }

// name records the harness that holds the lock.
func (l *WorkspaceLock) name(harnessID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil && l.holder.HarnessID != harnessID {
		l.holder.HarnessID = harnessID
		l.write()
	}
}

// Release lets the workspace go. The lock file stays (removing it would race with the next
// holder's open); its content is cleared.
func (l *WorkspaceLock) Release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	if l.holder.Mode != task.SharedReadOnly {
		_ = l.f.Truncate(0)
	}
	_ = l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
}

// UseWorkspaceLock gives the harness a lock taken for it before it was created (the foreground
// `run` takes the workspace first, so that a refused run creates nothing). Run then holds it
// and releases it when it returns.
func (h *Harness) UseWorkspaceLock(l *WorkspaceLock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wsLock = l
}

// holdWorkspace takes the harness's workspace for a run, unless it is a sub-agent (it works
// under its parent's lock, in its parent's worktree or, with subAgents: worktree, in one of
// its own that it makes here) or was given a lock. It returns what lets it go. h.mu held.
func (h *Harness) holdWorkspaceLocked() (release func(), err error) {
	if err := h.ensureWorktreeLocked(); err != nil {
		return nil, fmt.Errorf("harness %s: %w", h.ID(), err)
	}
	if h.st.ParentHarnessID != "" {
		return func() {}, nil
	}
	if h.task.Workspace.CommitsSteps() {
		if err := checkCommitWorkspace(h.task.Workspace.Path); err != nil {
			return nil, fmt.Errorf("harness %s: %w", h.ID(), err)
		}
	}
	l := h.wsLock
	h.wsLock = nil
	if ws, _ := filepath.Abs(h.task.Workspace.Path); l == nil || l.workspace != ws {
		l.Release()
		if l, err = LockWorkspace(h.task, h.ID()); err != nil {
			return nil, fmt.Errorf("harness %s: %w", h.ID(), err)
		}
	}
	l.name(h.ID())
	return l.Release, nil
}
