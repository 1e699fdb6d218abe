// Package control is how harness-edge processes reach a store: the process that owns it (the
// daemon, or a foreground `run`) serves the operations on a Unix socket in the store directory
// and, for the daemon, on an optional HTTP API; every other process is a Client of it, or opens
// the store itself when no owner runs (Local). All three offer the same API.
//
// Connect (and Do) reach a store whoever has it; Own makes this process its owner for a
// foreground run; StartDaemon (or RunDaemon) runs the daemon.
package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/inbox"
	"github.com/harness-edge/harness-edge/runtime/itlog"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// API is every operation another process may ask of a store's owner.
type API interface {
	Health(ctx context.Context) (Health, error)
	List(ctx context.Context) ([]store.IndexEntry, error)
	State(ctx context.Context, id string) (*statefmt.HarnessState, error)
	// StateJSON is State as HarnessState JSON v1, the bytes statefmt.EncodeJSON writes: through
	// an owner, the bytes it sent, not decoded and encoded again.
	StateJSON(ctx context.Context, id string) ([]byte, error)
	// Submit creates a harness for a task and queues it (daemon only).
	Submit(ctx context.Context, s Submission) (string, error)
	Decide(ctx context.Context, id, gate string, approve bool, reason string) (Decision, error)
	Pause(ctx context.Context, id string) error
	// Resume queues a paused or interrupted harness (daemon only).
	Resume(ctx context.Context, id string) error
	Stop(ctx context.Context, id string) (statefmt.Status, error)
	// Events calls f with the harness's logged events numbered above `after`; with follow it
	// goes on with new ones until the harness completes or fails, ctx ends, or f fails.
	Events(ctx context.Context, id string, after uint64, follow bool, f func(event.Event) error) error
	// Tell stores a message from a human for the harness's next iteration (inbox.Tell).
	Tell(ctx context.Context, id, text string) (Told, error)
	// Logs writes a harness's iteration log to w (itlog.Print).
	Logs(ctx context.Context, id string, q itlog.Query, w io.Writer) error
	Freeze(ctx context.Context, mode FreezeMode) error
	Unfreeze(ctx context.Context) error
	Report(ctx context.Context, since time.Duration) (*Report, error)
	Verify(ctx context.Context, id string) ([]store.Problem, error)
	// Retry takes a failed harness (or one failed step) back to runnable, to be resumed.
	Retry(ctx context.Context, id string, req RetryRequest) (harness.RetryResult, error)
	// Replan applies a plan change to a harness that does not run.
	Replan(ctx context.Context, id string, req ReplanRequest) (harness.ReplanResult, error)
	// Checkpoint names the newest checkpoint of a harness that does not run; ListCheckpoints
	// lists what it can be rolled back to; Rollback makes one of those its newest checkpoint.
	Checkpoint(ctx context.Context, id string, req CheckpointRequest) (store.NamedPoint, error)
	ListCheckpoints(ctx context.Context, id string) (Checkpoints, error)
	Rollback(ctx context.Context, id string, req RollbackRequest) (harness.RollbackResult, error)
	// Delete removes a harness with its sub-agents and gives their disk space back.
	Delete(ctx context.Context, id string, force bool) (DeleteResult, error)
	// Prune deletes the old harnesses in some statuses.
	Prune(ctx context.Context, req PruneRequest) (DeleteResult, error)
}

// Owner is the kind of process that owns a store. The strings are stable: health answers and
// scripts carry them.
type Owner string

const (
	// OwnerDaemon runs submitted tasks, resumes interrupted harnesses and freezes.
	OwnerDaemon Owner = "daemon"
	// OwnerRun is a foreground run that owns the store while it lasts.
	OwnerRun Owner = "run"
	// OwnerNone is Local: the store opened by a command, no process runs anything.
	OwnerNone Owner = "none"
)

func (o Owner) String() string { return string(o) }

// Health is what GET /v1/health says about the owner.
type Health struct {
	OK      bool           `json:"ok"`
	PID     int            `json:"pid"`
	Version string         `json:"version"`
	Owner   Owner          `json:"owner"`
	Engine  bridge.Backend `json:"engine"`
	Frozen  bool           `json:"frozen"`
	Running []string       `json:"running"`
	Queued  []string       `json:"queued"`
	// WaitingForRoom are the harnesses a full disk paused, to be resumed when it has room.
	WaitingForRoom []string `json:"waitingForRoom,omitempty"`
	// WaitingForWorkspace are the queued harnesses that wait for their workspace, and who holds it.
	WaitingForWorkspace map[string]string `json:"waitingForWorkspace,omitempty"`
	Started             time.Time         `json:"started"`
}

// Submission is a task sent to the daemon: the task file's bytes, its name (for errors) and the
// directory its relative workspace is resolved against.
type Submission struct {
	Task []byte `json:"task"`
	Name string `json:"name,omitempty"`
	Dir  string `json:"dir,omitempty"`
}

// Decision is the outcome of approve or reject.
type Decision struct {
	HarnessID string        `json:"harnessId"`
	Gate      statefmt.Gate `json:"gate"`
	// Resumed says the daemon queued the harness to go on (approve with nothing else pending).
	Resumed bool `json:"resumed"`
	// Replanner names the agent that replans by itself on resume after a rejected step gate
	// (empty: a human replans).
	Replanner string `json:"replanner,omitempty"`
}

// FreezeMode says what a freeze does with the work already running.
type FreezeMode string

const (
	FreezeContinue FreezeMode = "continue" // running harnesses go on; nothing new starts
	FreezePause    FreezeMode = "pause"    // running harnesses pause too; unfreeze resumes them
)

// ReasonFrozen is the pause reason of harnesses a freeze paused; unfreeze (or the next daemon,
// once unfrozen) resumes them.
const ReasonFrozen = "frozen"

// ReasonRequested is the pause reason of `pause`.
const ReasonRequested = "paused by request"

// frozenFile marks a frozen store: a daemon restarted on it stays frozen.
const frozenFile = "frozen"

// Errors a client can tell apart (the HTTP API maps them to status codes).
var (
	ErrNotDaemon = errors.New("only the daemon does this")
	ErrBadInput  = errors.New("bad input")
)

// inputError is a request refused for what it holds. Its message is the problem alone, as the
// command line words it without a daemon; errors.Is finds ErrBadInput in it, and what it wraps.
type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{ErrBadInput, e.err} }

// badInput is an inputError made as fmt.Errorf makes errors (%w wraps).
func badInput(format string, args ...any) error { return inputError{fmt.Errorf(format, args...)} }

// ErrWaiting matches a *WaitingError: a harness that waits for a human cannot go on.
var ErrWaiting = errors.New("waits for a human")

// WaitingError refuses to resume a harness whose gates (or its sub-agents') wait for a human.
// Its message is the one a foreground resume gives: the gates, and the commands that answer
// them.
type WaitingError struct {
	HarnessID string
	Gates     []harness.PendingGate
}

func (e *WaitingError) Error() string {
	return fmt.Sprintf("harness %s is paused: %s", e.HarnessID, GateHint(e.HarnessID, e.Gates))
}

func (e *WaitingError) Is(target error) bool { return target == ErrWaiting }

// GateHint says how to go on from a paused harness: the gates that wait for a human and the
// commands that answer them, or else `resume`.
func GateHint(id string, gates []harness.PendingGate) string {
	if len(gates) == 0 {
		return fmt.Sprintf("continue it with `harness-edge resume %s`", id)
	}
	var parts []string
	for _, g := range gates {
		name := g.Gate.ID
		if g.HarnessID != id {
			name = g.HarnessID + "/" + g.Gate.ID
		}
		parts = append(parts, fmt.Sprintf("%s waits for a human: `harness-edge approve %s %s` or `harness-edge reject %s %s --reason TEXT`, then `harness-edge resume %s`",
			harness.DescribeGate(name, g.Gate.Kind, g.Gate.StepID), id, name, id, name, id))
	}
	hint := idlist.JoinMore(parts, "; ", "gate")
	if len(parts) > idlist.Max {
		hint += " waiting too (`harness-edge report` lists them all)"
	}
	return hint
}

// Config configures a Server.
type Config struct {
	// Owner is what kind of process serves the store (default OwnerNone).
	Owner Owner
	// Concurrency is how many harnesses the daemon runs at once (default 2).
	Concurrency int
	// Manager options: event sinks (the server adds its own), Dream Mode, the governor.
	Options harness.Options
	Version string
	Logger  *slog.Logger
	// RoomPoll is how often a daemon checks whether a full disk has room again (default 5 s).
	RoomPoll time.Duration
	// RunGuard, when set, is asked before the daemon runs a harness (on start, on recovery and
	// at every resume): an error that wraps ErrHandedOver means another device owns the
	// harness now, and the daemon pauses it here with that error as its reason instead of
	// running it. Any other error is logged and the harness runs: a guard that cannot tell
	// must not keep a device from what it holds.
	RunGuard func(ctx context.Context, e store.IndexEntry) error
}

// ErrHandedOver matches a RunGuard's answer that the harness belongs to another device now.
var ErrHandedOver = errors.New("handed over")

// Server owns a store: it runs the operations of API on it and, as a daemon, schedules the
// harnesses it holds.
type Server struct {
	store    *store.Store
	m        *harness.Manager
	cfg      Config
	notify   *broker
	logDir   string
	inboxDir string
	log      *slog.Logger
	start    time.Time

	mu      sync.Mutex
	frozen  bool
	queue   []string
	running map[string]bool
	// cancels cancels the context of each scheduled run (in running), from the moment it is
	// scheduled: a pause reaches it even before its Run has started.
	cancels map[string]context.CancelCauseFunc
	closing bool
	// roomWait holds the harnesses a full disk stopped (see waitsForRoom): they are queued
	// again when the store has room (see Schedule).
	roomWait map[string]bool
	// approvedWhileRunning holds the harnesses whose last gate was approved while their run was
	// still stopping at it: they are queued again when that run ends paused.
	approvedWhileRunning map[string]bool
	wake                 chan struct{}
	runs                 sync.WaitGroup
	// beforeRun, when set (by tests), is called as a scheduled run starts, before its Run.
	beforeRun func(id string)
	// afterRun, when set (by tests), is called as a scheduled run's Run returns, before the run
	// is over for the scheduler.
	afterRun func(id string)
	// blocked are queued harnesses whose workspace another harness holds (see workspace.go).
	blocked map[string]blockedRun
	// reports keeps the report's entries of the harnesses that have not moved (see Report).
	reports reportCache
}

// NewServer makes a server over an open store.
func NewServer(db *store.Store, cfg Config) *Server {
	cfg.Owner = cmp.Or(cfg.Owner, OwnerNone)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 2)
	cfg.RoomPoll = cmp.Or(cfg.RoomPoll, 5*time.Second)
	s := &Server{store: db, cfg: cfg, notify: newBroker(), log: cfg.Logger, start: time.Now().UTC(),
		running: map[string]bool{}, cancels: map[string]context.CancelCauseFunc{}, roomWait: map[string]bool{}, approvedWhileRunning: map[string]bool{}, wake: make(chan struct{}, 1),
		blocked: map[string]blockedRun{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	o := cfg.Options
	o.Sinks = append(slices.Clone(o.Sinks), s.notify)
	o.LogDir = cmp.Or(o.LogDir, itlog.Dir(db.Dir()))
	o.InboxDir = cmp.Or(o.InboxDir, inbox.Dir(db.Dir()))
	s.logDir, s.inboxDir = o.LogDir, o.InboxDir
	s.m = harness.NewManager(db, o)
	if _, err := os.Stat(filepath.Join(db.Dir(), frozenFile)); err == nil {
		s.frozen = true
	}
	return s
}

// Local is a server over a store that no process owns: commands run on it directly.
func Local(db *store.Store) *Server { return NewServer(db, Config{}) }

// Manager is the server's harness manager.
func (s *Server) Manager() *harness.Manager { return s.m }

// Store is the store the server owns.
func (s *Server) Store() *store.Store { return s.store }

func (s *Server) daemon() bool { return s.cfg.Owner == OwnerDaemon }

func (s *Server) Health(context.Context) (Health, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// What the scheduler started, and what runs here otherwise (a foreground run's harness).
	// A harness waiting for its workspace that the scheduler is trying again has not started:
	// it is still queued, in its place at the head, and waiting.
	running := append([]string{}, s.m.Running()...)
	var retrying []string
	for id := range s.running {
		switch _, blocked := s.blocked[id]; {
		case slices.Contains(running, id):
		case blocked:
			retrying = append(retrying, id)
		default:
			running = append(running, id)
		}
	}
	sort.Strings(running)
	sort.Strings(retrying)
	return Health{OK: true, PID: os.Getpid(), Version: s.cfg.Version, Owner: s.cfg.Owner, Engine: s.store.Engine().Backend(),
		Frozen: s.frozen, Running: running, Queued: append(retrying, s.queue...), Started: s.start,
		WaitingForRoom: slices.Sorted(maps.Keys(s.roomWait)), WaitingForWorkspace: s.waitingLocked(retrying)}, nil
}

func (s *Server) List(context.Context) ([]store.IndexEntry, error) {
	l, err := s.store.List()
	if l == nil {
		l = []store.IndexEntry{}
	}
	s.mu.Lock()
	for i := range l {
		l[i].WaitingForRoom = s.roomWait[l[i].ID]
	}
	s.mu.Unlock()
	return l, err
}

// State is the harness's last checkpoint (every change is checkpointed before it is acted on,
// so for a running harness too). A read of a harness this process does not hold loads nothing
// that stays.
func (s *Server) State(_ context.Context, id string) (*statefmt.HarnessState, error) {
	if err := store.ValidID(id); err != nil {
		return nil, err
	}
	loaded := s.m.Loaded(id)
	st, err := s.store.Restore(id)
	if !loaded && !s.m.Loaded(id) {
		s.store.Release(id)
	}
	return st, err
}

func (s *Server) StateJSON(ctx context.Context, id string) ([]byte, error) {
	st, err := s.State(ctx, id)
	if err != nil {
		return nil, err
	}
	return statefmt.EncodeJSON(st)
}

func (s *Server) Submit(_ context.Context, sub Submission) (string, error) {
	if !s.daemon() {
		return "", fmt.Errorf("%w: no daemon owns this store (owner: %s); start one with `harness-edge serve`, or run the task in the foreground with `harness-edge run`", ErrNotDaemon, s.cfg.Owner)
	}
	if sub.Dir != "" && !filepath.IsAbs(sub.Dir) {
		return "", badInput("dir %q is not an absolute path", sub.Dir)
	}
	dir := cmp.Or(sub.Dir, ".")
	t, err := task.ParseAt(cmp.Or(sub.Name, "the submitted task"), sub.Task, dir)
	if errors.Is(err, task.ErrTooLarge) {
		return "", err // as `run` and `submit` say it (413 over HTTP)
	}
	if err != nil {
		return "", badInput("%w", err)
	}
	if t.LongRunning != nil && !*t.LongRunning {
		return "", badInput("%s has longRunning: false: the direct path runs in the foreground (`harness-edge run`), the daemon runs durable harnesses", cmp.Or(sub.Name, "the task"))
	}
	h, err := s.m.Create(t)
	if err != nil {
		return "", err
	}
	s.enqueue(h.ID())
	s.log.Info("submitted", "harness", h.ID(), "task", sub.Name)
	return h.ID(), nil
}

func (s *Server) Decide(_ context.Context, id, gate string, approve bool, reason string) (Decision, error) {
	if !approve && reason == "" {
		return Decision{}, badInput("a rejection needs a reason")
	}
	if err := store.ValidID(id); err != nil {
		return Decision{}, err
	}
	if err := checkWords("", reason); err != nil {
		return Decision{}, err
	}
	defer s.forget(id)()
	d, err := s.m.Decide(id, gate, approve, reason)
	if err != nil {
		return Decision{}, err
	}
	out := Decision{HarnessID: d.HarnessID, Gate: d.Gate}
	if !approve && d.Gate.Kind == harness.GateStep {
		out.Replanner = s.m.OwnerReplanner(d.HarnessID)
	}
	if approve && s.daemon() {
		root := s.root(id)
		if gates, err := s.m.PendingGates(root); err == nil && len(gates) == 0 {
			out.Resumed = s.resumeApproved(root)
		}
	}
	return out, nil
}

// root is the top-level harness of a sub-agent (or id itself).
func (s *Server) root(id string) string {
	for range 32 {
		e, err := s.store.Index(id)
		if err != nil || e.ParentHarnessID == "" {
			return id
		}
		id = e.ParentHarnessID
	}
	return id
}

// actionWait bounds how long pause and stop wait for a harness running here to come to rest.
const actionWait = 10 * time.Second

// Pause pauses a harness. One running here is stopped and waited for (at most actionWait), so
// that the answer is the status it came to; a queued one leaves the queue. A refused pause
// changes nothing: a queued harness stays queued, in its place.
func (s *Server) Pause(_ context.Context, id string) error {
	if err := store.ValidID(id); err != nil {
		return err
	}
	if s.pauseRun(id, ReasonRequested) {
		s.waitIdle(id)
		return nil
	}
	defer s.forget(id)()
	at := s.unqueue(id)
	if err := s.m.Pause(id, ReasonRequested); err != nil {
		s.requeue(id, at)
		return err
	}
	s.waitIdle(id)
	return nil
}

func (s *Server) Resume(_ context.Context, id string) error {
	if err := store.ValidID(id); err != nil {
		return err
	}
	if !s.daemon() {
		return fmt.Errorf("%w: resume a harness in the foreground with `harness-edge resume %s`, or start the daemon", ErrNotDaemon, id)
	}
	defer s.forget(id)()
	if _, err := s.m.ResumeFromCheckpoint(id); err != nil {
		return err
	}
	if gates, _ := s.m.PendingGates(id); len(gates) > 0 {
		return &WaitingError{HarnessID: id, Gates: gates}
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return fmt.Errorf("%w: harness %s: the daemon is shutting down; the next daemon on this store can resume it", ErrNotDaemon, id)
	}
	// Queued, durably: a daemon that stops before it runs leaves it for the next one.
	if err := s.m.MarkQueued(id); err != nil {
		return err
	}
	s.enqueue(id)
	return nil
}

// Stop ends a harness for good and waits (at most actionWait) for one running here to stop, so
// that the answer is its final status. A refused stop changes nothing: a queued harness stays
// queued, in its place.
func (s *Server) Stop(_ context.Context, id string) (statefmt.Status, error) {
	if err := store.ValidID(id); err != nil {
		return "", err
	}
	defer s.forget(id)()
	at := s.unqueue(id)
	if err := s.m.Stop(id); err != nil {
		s.requeue(id, at)
		return "", err
	}
	h, err := s.m.Get(id)
	if err != nil {
		return "", err
	}
	s.waitIdle(id)
	return h.Status(), nil
}

// waitIdle waits, at most actionWait, until the harness neither runs in this process nor is
// scheduled to.
func (s *Server) waitIdle(id string) { s.waitIdleUntil(id, time.Now().Add(actionWait)) }

// waitIdleUntil is waitIdle up to a deadline of the caller's.
func (s *Server) waitIdleUntil(id string, deadline time.Time) {
	for ; time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		scheduled := s.running[id]
		s.mu.Unlock()
		if scheduled {
			continue
		}
		if !s.m.Loaded(id) {
			return
		}
		h, err := s.m.Get(id)
		if err != nil || !h.Running() {
			return
		}
	}
}

// forget returns what to call once a request about a harness is done: it lets go of what the
// request loaded of the harness into memory, unless it was held before, or runs or waits in
// the queue now. A request, refused or not, leaves the server's memory as it found it.
func (s *Server) forget(id string) func() {
	if s.m.Loaded(id) {
		return func() {}
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.running[id] && !slices.Contains(s.queue, id) {
			s.m.Release(id)
		}
	}
}

func (s *Server) Events(ctx context.Context, id string, after uint64, follow bool, f func(event.Event) error) error {
	if err := store.ValidID(id); err != nil {
		return err
	}
	if _, err := s.store.Index(id); err != nil {
		return err
	}
	var wake <-chan struct{}
	if follow {
		ch, cancel := s.notify.subscribe(id)
		defer cancel()
		wake = ch
	}
	for {
		idx, err := s.store.Index(id)
		if err != nil {
			return err
		}
		var ferr error
		err = s.store.Events(id, after, func(e event.Event) bool {
			if ferr = f(e); ferr != nil {
				return false
			}
			after = e.N
			return true
		})
		if err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
		// No other process writes a store this one owns, so without a daemon nothing more comes.
		if !follow || s.cfg.Owner == OwnerNone || finished(idx.Status) {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil
		}
	}
}

func finished(st statefmt.Status) bool {
	return st == statefmt.StatusCompleted || st == statefmt.StatusFailed
}

func (s *Server) Freeze(_ context.Context, mode FreezeMode) error {
	if !s.daemon() {
		return fmt.Errorf("%w: freeze stops a daemon from starting work; no daemon owns this store", ErrNotDaemon)
	}
	mode = cmp.Or(mode, FreezeContinue)
	if mode != FreezeContinue && mode != FreezePause {
		return badInput("freeze mode %q is not continue or pause", mode)
	}
	if err := os.WriteFile(filepath.Join(s.store.Dir(), frozenFile), []byte(mode+"\n"), 0o600); err != nil {
		return err
	}
	s.mu.Lock()
	s.frozen = true
	var pausing []string
	if mode == FreezePause {
		for id := range s.running {
			s.pauseRunLocked(id, ReasonFrozen)
			pausing = append(pausing, id)
		}
	}
	s.mu.Unlock()
	// As Pause does: the answer comes once the harnesses have paused, so that what the caller
	// reads next (health, ls) shows them paused, not still running; all within one wait.
	deadline := time.Now().Add(actionWait)
	for _, id := range pausing {
		s.waitIdleUntil(id, deadline)
	}
	s.log.Info("frozen", "mode", mode)
	return nil
}

func (s *Server) Unfreeze(context.Context) error {
	if !s.daemon() {
		return fmt.Errorf("%w: no daemon owns this store", ErrNotDaemon)
	}
	if err := os.Remove(filepath.Join(s.store.Dir(), frozenFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	s.mu.Lock()
	s.frozen = false
	s.mu.Unlock()
	// Harnesses the freeze paused go on.
	l, err := s.store.List()
	if err != nil {
		return err
	}
	for _, e := range l {
		if e.ParentHarnessID == "" && e.Status == statefmt.StatusPaused {
			if st, err := s.store.Restore(e.ID); err == nil && st.StatusReason == ReasonFrozen {
				s.enqueue(e.ID)
			}
		}
	}
	s.log.Info("unfrozen")
	s.kick()
	return nil
}

func (s *Server) Verify(_ context.Context, id string) ([]store.Problem, error) {
	if id != "" {
		if err := store.ValidID(id); err != nil {
			return nil, err
		}
	}
	p, err := s.store.Verify(id)
	if p == nil {
		p = []store.Problem{}
	}
	return p, err
}

// --- the daemon's scheduler

// enqueue queues a harness to run (once); it reports whether it was queued now.
func (s *Server) enqueue(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] || slices.Contains(s.queue, id) || s.closing {
		return false
	}
	s.queue = append(s.queue, id)
	s.kickLocked()
	return true
}

// resumeApproved queues a harness whose gates are all answered. One whose run has not ended
// yet (it is stopping at the gate just approved) is queued when that run ends paused; without
// this an approval in that instant would leave the harness paused with nothing to wait for.
func (s *Server) resumeApproved(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing || slices.Contains(s.queue, id):
		return false
	case s.running[id]:
		s.approvedWhileRunning[id] = true
		return true
	}
	s.queue = append(s.queue, id)
	s.kickLocked()
	return true
}

// unqueue takes a harness out of the queue and returns where it was (-1: it was not queued).
func (s *Server) unqueue(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.queue, id)
	if i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	return i
}

// requeue puts a harness unqueue took out back where it was (nothing when at is -1).
func (s *Server) requeue(id string, at int) {
	if at < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] || slices.Contains(s.queue, id) || s.closing {
		return
	}
	s.queue = slices.Insert(s.queue, min(at, len(s.queue)), id)
	s.kickLocked()
}

// pauseRun pauses a harness the scheduler started, whether its Run has begun or not; it reports
// whether there was one.
func (s *Server) pauseRun(id, reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pauseRunLocked(id, reason)
}

func (s *Server) pauseRunLocked(id, reason string) bool {
	cancel, ok := s.cancels[id]
	if ok {
		cancel(harness.PauseCause(reason))
	}
	return ok
}

func (s *Server) kick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kickLocked()
}

func (s *Server) kickLocked() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Recover queues what the store holds that should run: harnesses that were running when their
// process died (interrupted), created ones (submitted, not started), and the ones a stopping
// daemon or a freeze paused. Oldest first.
func (s *Server) Recover() ([]string, error) {
	l, err := s.store.List()
	if err != nil {
		return nil, err
	}
	sort.Slice(l, func(i, j int) bool { return l[i].UpdatedAt.Before(l[j].UpdatedAt) })
	var ids []string
	for _, e := range l {
		if e.Damaged != "" {
			s.log.Error("recover: harness is damaged; not running it (see `harness-edge verify`)", "harness", e.ID, "err", e.Damaged)
			continue
		}
		if e.ParentHarnessID != "" {
			continue // sub-agents run inside their parent
		}
		switch e.Status {
		case statefmt.StatusRunning, statefmt.StatusCreated:
		case statefmt.StatusPaused:
			st, err := s.store.Restore(e.ID)
			if err != nil {
				s.log.Warn("recover: cannot read", "harness", e.ID, "err", err)
				continue
			}
			if st.StatusReason != harness.ReasonShutdown && st.StatusReason != ReasonFrozen && st.StatusReason != harness.ReasonQueued && !harness.PausedForDiskFull(st) {
				continue
			}
		default:
			continue
		}
		if s.enqueue(e.ID) {
			ids = append(ids, e.ID)
		}
	}
	return ids, nil
}

// Schedule runs queued harnesses, Concurrency at a time, until ctx ends; then it pauses the
// running ones (reason harness.ReasonShutdown, so the next daemon resumes them) and waits for
// them up to grace. Every RoomPoll, it queues again the harnesses a full disk paused once the
// store has room.
func (s *Server) Schedule(ctx context.Context, grace time.Duration) {
	runCtx, cancelRuns := context.WithCancel(context.Background())
	defer cancelRuns()
	poll := time.NewTicker(s.cfg.RoomPoll)
	defer poll.Stop()
	for {
		s.mu.Lock()
		for i := 0; !s.frozen && !s.closing && len(s.running) < s.cfg.Concurrency && i < len(s.queue); {
			id := s.queue[i]
			if s.isBlockedLocked(id) || s.running[id] {
				// It keeps its place; the ones behind it may run. A running one is one whose run
				// was refused its workspace and has not ended yet: it runs once that run is over.
				i++
				continue
			}
			s.queue = slices.Delete(s.queue, i, i+1)
			ctx, cancel := context.WithCancelCause(runCtx)
			s.running[id], s.cancels[id] = true, cancel
			s.runs.Add(1)
			go s.run(ctx, id)
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-poll.C:
			s.requeueWithRoom()
		case <-ctx.Done():
			s.shutdown(grace)
			return
		}
	}
}

// waitsForRoom says whether the daemon resumes a harness the full disk stopped once there is
// room: one paused for the disk; one left running when even that pause was refused (resumed
// as after a crash); one still queued to run, or to resume after a shutdown, whose start the
// disk refused.
func waitsForRoom(st *statefmt.HarnessState) bool {
	switch {
	case harness.PausedForDiskFull(st), st.Status == statefmt.StatusRunning:
		return true
	case st.Status == statefmt.StatusPaused:
		return st.StatusReason == harness.ReasonQueued || st.StatusReason == harness.ReasonShutdown
	}
	return false
}

// requeueWithRoom queues the harnesses a full disk paused, when the store has room again and
// they are still paused for it (a human may have stopped or resumed one meanwhile).
func (s *Server) requeueWithRoom() {
	s.mu.Lock()
	ids := slices.Sorted(maps.Keys(s.roomWait))
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if err := s.store.CheckRoom(); err != nil {
		return
	}
	for _, id := range ids {
		s.mu.Lock()
		delete(s.roomWait, id)
		s.mu.Unlock()
		if h, err := s.m.Get(id); err != nil || !waitsForRoom(h.State()) { // a human stopped or resumed it meanwhile
			continue
		}
		s.log.Info("the store has room again: resuming", "harness", id)
		s.enqueue(id)
	}
}

func (s *Server) run(ctx context.Context, id string) {
	defer s.runs.Done()
	busy, paused := false, false
	defer func() {
		s.mu.Lock()
		s.cancels[id](nil)
		delete(s.running, id)
		delete(s.cancels, id)
		if !busy {
			delete(s.blocked, id)
			s.unblockAllLocked() // the workspace this run held is free now
		}
		if s.approvedWhileRunning[id] {
			delete(s.approvedWhileRunning, id)
			if paused && !s.closing && !slices.Contains(s.queue, id) {
				s.log.Info("its gate was approved as it stopped there: resuming", "harness", id)
				s.queue = append(s.queue, id)
			}
		}
		s.mu.Unlock()
		s.kick()
	}()
	if s.beforeRun != nil {
		s.beforeRun(id)
	}
	if s.handedOver(ctx, id) {
		return
	}
	h, err := s.m.ResumeFromCheckpoint(id)
	if err != nil {
		s.log.Warn("cannot run", "harness", id, "err", err)
		return
	}
	// A harness waiting for its workspace is tried again every WorkspaceRetry: its tries are not
	// news (the wait was logged once), and would fill the log over a night.
	s.mu.Lock()
	_, retry := s.blocked[id]
	s.mu.Unlock()
	if retry {
		s.log.Debug("trying its workspace again", "harness", id)
	} else {
		s.log.Info("running", "harness", id, "status", h.Status())
	}
	err = h.Run(ctx)
	if s.afterRun != nil {
		s.afterRun(id)
	}
	if errors.Is(err, harness.ErrWorkspaceBusy) {
		busy = true
		s.waitForWorkspace(id, err)
		s.m.Release(id)
		return
	}
	st := h.State()
	// Paused by itself, at a gate: not by a pause or a shutdown (those cancel ctx), nor by a
	// full disk.
	paused = st.Status == statefmt.StatusPaused && ctx.Err() == nil && !harness.PausedForDiskFull(st)
	switch {
	case harness.PausedForDiskFull(st) || errors.Is(err, store.ErrDiskFull) && ctx.Err() == nil && waitsForRoom(st):
		why := "harness paused: the store's disk is full; it resumes when there is room"
		switch {
		case st.Status == statefmt.StatusRunning:
			why = "harness stopped: the store's disk is full past its reserve, and even its pause was refused; it resumes from its last checkpoint when there is room"
		case !harness.PausedForDiskFull(st):
			why = "harness could not start: the store's disk is full; it starts when there is room"
		}
		s.log.Warn(why, "harness", id, "err", err)
		s.mu.Lock()
		s.roomWait[id] = true
		s.mu.Unlock()
	case err == nil || errors.Is(err, harness.ErrPaused):
		s.log.Info("harness ended", "harness", id, "status", st.Status, "reason", event.LogText(st.StatusReason))
	default:
		s.log.Error("harness run failed", "harness", id, "err", err)
	}
	s.m.Release(id)
}

// HandOver stops a harness that this daemon runs or has queued because another device owns it
// now: a running one is paused with reason (at once: the step it is in is interrupted, and
// runs again wherever the harness goes on), a queued one leaves the queue. It reports whether
// there was one.
func (s *Server) HandOver(id, reason string) bool {
	at := s.unqueue(id)
	if s.pauseRun(id, reason) {
		s.log.Warn("pausing the harness: another device owns it now", "harness", id, "reason", event.LogText(reason))
		return true
	}
	return at >= 0
}

// guardWait bounds how long a run waits for the RunGuard's answer.
const guardWait = 3 * time.Second

// handedOver asks the RunGuard whether the harness may run here; when another device owns it,
// a running (interrupted) harness is paused with the guard's answer as its reason, and it
// reports true: the run does not start.
func (s *Server) handedOver(ctx context.Context, id string) bool {
	if s.cfg.RunGuard == nil {
		return false
	}
	e, err := s.store.Index(id)
	if err != nil {
		return false // the run reports it
	}
	gctx, cancel := context.WithTimeout(ctx, guardWait)
	err = s.cfg.RunGuard(gctx, e)
	cancel()
	switch {
	case err == nil:
		return false
	case !errors.Is(err, ErrHandedOver):
		s.log.Warn("the fleet's fence could not be read; running the harness this device holds", "harness", id, "err", err)
		return false
	}
	s.log.Warn("not running the harness: another device owns it now", "harness", id, "reason", event.LogText(err.Error()))
	if e.Status == statefmt.StatusRunning {
		if perr := s.m.Pause(id, err.Error()); perr != nil {
			s.log.Error("pausing a harness another device owns", "harness", id, "err", perr)
		}
	}
	s.m.Release(id)
	return true
}

// shutdown pauses every harness the scheduler started and waits for them, at most grace. The
// pause reaches a run through its context, so one whose Run has not begun yet pauses as soon as
// it does: every started harness ends paused with harness.ReasonShutdown, for the next daemon.
// Queued ones that never started are left as they are; the next daemon queues them again.
func (s *Server) shutdown(grace time.Duration) {
	s.mu.Lock()
	s.closing = true
	s.queue = nil
	for id := range s.running {
		s.pauseRunLocked(id, harness.ReasonShutdown)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.runs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.log.Warn("shutdown: harnesses still running after the grace period; their last checkpoints stand", "grace", grace)
	}
}

// broker wakes followers of a harness's events (a sink on the server's manager).
type broker struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]bool
}

func newBroker() *broker { return &broker{subs: map[string]map[chan struct{}]bool{}} }

func (b *broker) Emit(e event.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs[e.HarnessID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (b *broker) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.subs[id] == nil {
		b.subs[id] = map[chan struct{}]bool{}
	}
	b.subs[id][ch] = true
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.subs[id], ch)
		b.mu.Unlock()
	}
}
