package harness

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/runtime/agent"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/tools"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Options configures a Manager. Zero values take the defaults.
type Options struct {
	// Clock is the time source (default: the wall clock).
	Clock clock.Clock
	// NewID makes harness ids for tasks without one (default: NewID).
	NewID func() string
	// Sinks receive every event after it is durable.
	Sinks []event.Sink
	// Hooks run around every tool call, before the task file's shell hooks.
	Hooks tools.Hooks
	// Dream turns Dream Mode on for every harness (a task can turn it on for itself).
	Dream bool
	// Governor, when set, holds each step back until the machine has room for it, checking
	// every GovernorPoll (default 5s).
	Governor     Governor
	GovernorPoll time.Duration
	// StartCheckpoint is how long a step may run before its start (status running, the
	// step_started event) is checkpointed on its own (default DefaultStartCheckpoint). A step
	// that ends sooner writes one checkpoint, its start and its outcome together; a
	// side-effecting tool call, a save or a Dream Mode tick writes the start before it. Negative:
	// every start is checkpointed at once.
	StartCheckpoint time.Duration
	// LogDir is where agents keep their iterations' live output (package itlog); empty: nowhere.
	LogDir string
	// InboxDir is where messages to the harnesses wait for their agents (package inbox).
	InboxDir string
}

// DefaultStartCheckpoint is Options.StartCheckpoint's default.
const DefaultStartCheckpoint = 100 * time.Millisecond

// Store is what the harness core needs of a checkpoint store: the Pebble store (package store)
// in production, an in-memory one (store/memstore) where harness logic is tested without a
// disk. Both pass one conformance suite (internal/storetest).
type Store interface {
	// PersistWith makes state the harness's newest checkpoint, with its events (and the task,
	// the first time) in the same durable batch; it returns the events written, numbered.
	PersistWith(state *statefmt.HarnessState, x store.Extras) (store.Checkpoint, error)
	// Restore returns the harness's last checkpointed state (errors wrap store.ErrNotFound).
	Restore(id string) (*statefmt.HarnessState, error)
	// Task returns the task stored with the harness.
	Task(id string) ([]byte, error)
	// Index returns the harness's index entry.
	Index(id string) (store.IndexEntry, error)
	// List lists every harness.
	List() ([]store.IndexEntry, error)
	// Release lets go of what the store keeps in memory for a harness.
	Release(id string)
	// IsAvailable reports whether the Eternal Engine (not the Go fallback) makes the records.
	IsAvailable() bool
}

// Manager creates, finds, lists, runs, stops and resumes harnesses over one store.
type Manager struct {
	store Store
	clock clock.Clock
	newID func() string
	sinks []event.Sink
	hooks tools.Hooks
	dream bool
	// logDir and inboxDir are Options'.
	logDir, inboxDir string

	governor     Governor
	governorPoll time.Duration
	startCP      time.Duration

	mu        sync.Mutex
	harnesses map[string]*Harness
	// deleting holds the harnesses a deletion reserved (Reserve).
	deleting map[string]bool
}

// NewManager returns a manager over an open store.
func NewManager(db Store, o Options) *Manager {
	m := &Manager{store: db, clock: o.Clock, newID: o.NewID, sinks: o.Sinks, hooks: o.Hooks, dream: o.Dream, logDir: o.LogDir, inboxDir: o.InboxDir,
		governor: o.Governor, governorPoll: cmp.Or(o.GovernorPoll, 5*time.Second), startCP: cmp.Or(o.StartCheckpoint, DefaultStartCheckpoint),
		harnesses: map[string]*Harness{}, deleting: map[string]bool{}}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.newID == nil {
		m.newID = func() string { return newHarnessID(m.clock.Now()) }
	}
	return m
}

// Store is the manager's checkpoint store.
func (m *Manager) Store() Store { return m.store }

// newHarness wraps a state; when the engine is missing, the harness's next checkpoint carries
// a warning saying so.
func (m *Manager) newHarness(t *task.Task, st *statefmt.HarnessState) *Harness {
	h := &Harness{m: m, task: t, st: st, agents: map[string]agent.Agent{}}
	if !m.store.IsAvailable() {
		h.emit(event.Event{Type: event.Warning, Message: "the Eternal Engine is not available: checkpoints are written by the Go fallback (keyframes only)"})
	}
	return h
}

// ErrExists is returned by Create for an id the store already holds.
var ErrExists = errors.New("harness already exists")

// existsError refuses to create a harness the store holds, saying what can be done with it.
func existsError(id string, status statefmt.Status) error {
	switch status {
	case statefmt.StatusCompleted:
		return fmt.Errorf("harness %s: %w and has completed, so it cannot be resumed (give the task another id, look at it with `harness-edge show %s`, or delete it with `harness-edge delete %s`)", id, ErrExists, id, id)
	case statefmt.StatusFailed:
		return fmt.Errorf("harness %s: %w and has failed (retry it with `harness-edge retry %s`, then `harness-edge resume %s`; delete it with `harness-edge delete %s`; or give the task another id)", id, ErrExists, id, id, id)
	default:
		return fmt.Errorf("harness %s: %w and is %s (resume it with `harness-edge resume %s`, or give the task another id)", id, ErrExists, status, id)
	}
}

// Create makes a new harness for t in status created and persists it with its task, so that
// it can be resumed from the store alone. A declared plan is validated first: a bad task
// creates nothing.
func (m *Manager) Create(t *task.Task) (*Harness, error) {
	depth, err := delegationDepthOf(t)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if depth > t.MaxDepth {
		return nil, fmt.Errorf("task %s: its sub-agents would nest %d deep, above maxDepth %d", t.ID, depth, t.MaxDepth)
	}
	return m.create(t, nil)
}

// create makes and persists a harness; init adjusts its first state (sub-agents).
func (m *Manager) create(t *task.Task, init func(*statefmt.HarnessState)) (*Harness, error) {
	id := t.ID
	if id == "" {
		id = m.newID()
	}
	if err := store.ValidID(id); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.harnesses[id]; ok {
		return nil, existsError(id, h.Status())
	}
	if e, err := m.store.Index(id); err == nil {
		return nil, existsError(id, e.Status)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	now := m.clock.Now()
	taskID := t.ID
	if taskID == "" {
		taskID = id
	}
	cost, _ := statefmt.MicroUSD(t.Budget.CostUSD) // checked with the task
	st := &statefmt.HarnessState{SchemaVersion: statefmt.SchemaVersion, HarnessID: id, AgentName: t.Agent, TaskID: taskID,
		Status: statefmt.StatusCreated, CreatedAt: now, UpdatedAt: now, AutonomyLevel: t.Autonomy,
		Budget: &statefmt.Budget{ToolCalls: t.Budget.ToolCalls, Tokens: t.Budget.Tokens, WallClock: t.Budget.WallClock.Duration, CostMicroUSD: cost}}
	stored := t
	h := m.newHarness(withWorktree(t, id), st)
	if len(t.Plan) > 0 {
		p, err := newPlan(taskID, t.Plan, h.knownAgent, now)
		if err != nil {
			return nil, err
		}
		st.Plan = p
	}
	if init != nil {
		init(st)
	}
	var err error
	if h.taskJSON, err = json.Marshal(stored); err != nil {
		return nil, err
	}
	statefmt.Normalize(st)
	h.mu.Lock()
	h.pending = append([]event.Event{{Type: event.StateTransition, HarnessID: id, Time: now, To: statefmt.StatusCreated}}, h.pending...)
	err = h.checkpoint()
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m.harnesses[id] = h
	return h, nil
}

// Get returns the harness with this id, loading it from the store when this manager has not
// seen it yet.
func (m *Manager) Get(id string) (*Harness, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deleting[id] {
		return nil, store.BeingDeleted(id)
	}
	if h, ok := m.harnesses[id]; ok {
		return h, nil
	}
	st, err := m.store.Restore(id)
	if err != nil {
		return nil, err
	}
	t, err := m.storedTask(id)
	if err != nil {
		return nil, err
	}
	h := m.newHarness(withWorktree(t, id), st)
	m.harnesses[id] = h
	return h, nil
}

// Reserve marks harnesses as being deleted until done is called: Get refuses them meanwhile
// (store.BeingDeleted), so that nothing loads, resumes, retries or changes them while their
// deletion removes their worktrees without holding its caller's lock. It reserves nothing, and
// says so, when one of them is reserved already.
func (m *Manager) Reserve(ids []string) (done func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		if m.deleting[id] {
			return nil, store.BeingDeleted(id)
		}
	}
	for _, id := range ids {
		m.deleting[id] = true
	}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, id := range ids {
			delete(m.deleting, id)
		}
	}, nil
}

// Reserved reports whether a deletion has reserved the harness (Reserve).
func (m *Manager) Reserved(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deleting[id]
}

// storedTask reads the task the store keeps with the harness.
func (m *Manager) storedTask(id string) (*task.Task, error) {
	raw, err := m.store.Task(id)
	if err != nil {
		return nil, err
	}
	return parseStoredTask(id, raw)
}

func parseStoredTask(id string, raw []byte) (*task.Task, error) {
	return task.Parse("the stored task of harness "+id, raw)
}

// storedWorkspace is the workspace of the task stored with the harness, read without parsing
// the rest of the task where it can be.
func (m *Manager) storedWorkspace(id string) (task.Workspace, error) {
	raw, err := m.store.Task(id)
	if err != nil {
		return task.Workspace{}, err
	}
	if w, ok := task.StoredWorkspace(raw); ok {
		return w, nil
	}
	t, err := parseStoredTask(id, raw)
	if err != nil {
		return task.Workspace{}, err
	}
	return t.Workspace, nil
}

// List returns the store's harnesses (id, agent, status, parent, timestamps, head checkpoint).
func (m *Manager) List() ([]store.IndexEntry, error) { return m.store.List() }

// ResumeFromCheckpoint loads a harness from its last checkpoint for Run to continue: a paused
// one, or one that was running when its process died. Finished harnesses are refused.
func (m *Manager) ResumeFromCheckpoint(id string) (*Harness, error) {
	h, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	if p := h.State().ParentHarnessID; p != "" {
		return nil, fmt.Errorf("harness %s %w of %s: resume %s (it resumes its sub-agents)", id, ErrSubAgent, p, p)
	}
	switch s := h.Status(); s {
	case statefmt.StatusPaused, statefmt.StatusRunning, statefmt.StatusCreated:
		// The sub-agents of the steps a replan skipped or replaced, should the replan have
		// stopped before it ended them.
		if err := m.endSuperseded(h); err != nil {
			return nil, fmt.Errorf("harness %s: %w", id, err)
		}
		return h, nil
	default:
		return nil, &TransitionError{HarnessID: id, From: s, To: statefmt.StatusRunning}
	}
}

// Stop ends a harness for good, persisting its final state: completed if its plan is, failed
// otherwise. A harness running in this process stops at once (the step in flight is cut short,
// and its sub-agents stop with it); unfinished sub-agents of one that is not running are stopped
// too.
func (m *Manager) Stop(id string) error {
	h, err := m.Get(id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if h.running {
		h.stop(errStopped)
		h.mu.Unlock()
		return nil
	}
	switch h.st.Status {
	case statefmt.StatusCompleted, statefmt.StatusFailed:
		h.mu.Unlock()
		return transitionError(h.st, statefmt.StatusFailed)
	}
	var children []string
	for _, cid := range h.st.SubAgentIDs {
		if r := h.st.SubAgentResults[cid]; r.Status != statefmt.StatusCompleted && r.Status != statefmt.StatusFailed {
			children = append(children, cid)
		}
	}
	h.mu.Unlock()
	// The unfinished sub-agents stop first, so that the parent's final checkpoint records what
	// they came to.
	for _, cid := range children {
		if err := m.Stop(cid); err != nil && !errors.As(err, new(*TransitionError)) && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if c, err := m.Get(cid); err == nil {
			h.noteChild(cid, c.State(), "")
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running { // it started meanwhile
		h.stop(errStopped)
		return nil
	}
	return h.stopLocked()
}

// ErrNotStarted is returned by Pause for a harness that has not started (status created).
var ErrNotStarted = errors.New("has not started")

// ReasonShutdown is the pause reason of the harnesses a stopping daemon put aside; the next
// daemon on the store resumes them (as it resumes interrupted ones).
const ReasonShutdown = "daemon shutdown"

// ReasonQueued is the status reason of a paused harness a daemon queued to resume (MarkQueued):
// a daemon that stops before it ran leaves it so, and the next one queues it again.
const ReasonQueued = "queued to resume"

// MarkQueued records, durably, that a paused harness is queued to resume: its status reason
// becomes ReasonQueued. A harness that is not paused (or runs here) is left as it is.
func (m *Manager) MarkQueued(id string) error {
	h, err := m.Get(id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running || h.st.Status != statefmt.StatusPaused || h.st.StatusReason == ReasonQueued {
		return nil
	}
	return h.repauseLocked(ReasonQueued)
}

// repauseLocked gives a paused harness a new status reason, durably; a failed checkpoint leaves
// the old one. h.mu held.
func (h *Harness) repauseLocked(reason string) error {
	reason0, updated0 := h.st.StatusReason, h.st.UpdatedAt
	h.st.StatusReason, h.st.UpdatedAt = reason, h.now()
	if err := h.checkpoint(); err != nil {
		h.st.StatusReason, h.st.UpdatedAt = reason0, updated0
		return err
	}
	return nil
}

// Pause pauses a harness with a reason. One running in this process stops at once: the step in
// flight is cut short and goes on from its last save on resume (Run returns ErrPaused). One left
// running by a crashed process is marked paused. A paused harness stays as it is.
func (m *Manager) Pause(id, reason string) error {
	h, err := m.Get(id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		h.stop(&pauseRequest{reason})
		return nil
	}
	switch h.st.Status {
	case statefmt.StatusPaused:
		if h.st.StatusReason != ReasonQueued {
			return nil
		}
		// Queued to resume, and paused again before it ran: it stays paused, for this reason.
		return h.repauseLocked(reason)
	case statefmt.StatusRunning:
		return h.transitionLocked(statefmt.StatusPaused, reason)
	case statefmt.StatusCreated:
		return fmt.Errorf("harness %s %w: there is nothing to pause (stop it to drop it)", id, ErrNotStarted)
	default:
		return transitionError(h.st, statefmt.StatusPaused)
	}
}

// Running lists the top-level harnesses that run in this process now (their sub-agents run
// inside them), sorted.
func (m *Manager) Running() []string {
	m.mu.Lock()
	hs := make([]*Harness, 0, len(m.harnesses))
	for _, h := range m.harnesses {
		hs = append(hs, h)
	}
	m.mu.Unlock()
	var ids []string
	for _, h := range hs {
		h.mu.Lock()
		if h.running && h.st.ParentHarnessID == "" {
			ids = append(ids, h.st.HarnessID)
		}
		h.mu.Unlock()
	}
	slices.Sort(ids)
	return ids
}

// Running reports whether the harness runs in this process now.
func (h *Harness) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running
}

// Release forgets a harness this process is done with, and its sub-agents: the manager's copy
// of its state and the store's in-memory chain. Get loads it again when it is needed. A running
// harness (or one whose sub-agent runs) is left alone. A long-running owner (the daemon)
// releases each harness after its run, so its memory does not grow with every harness it ran.
func (m *Manager) Release(id string) {
	m.mu.Lock()
	h, ok := m.harnesses[id]
	m.mu.Unlock()
	var children []string
	if ok {
		h.mu.Lock()
		running := h.running
		children = slices.Clone(h.st.SubAgentIDs)
		h.mu.Unlock()
		if running {
			return
		}
		m.mu.Lock()
		delete(m.harnesses, id)
		m.mu.Unlock()
	}
	for _, c := range children {
		m.Release(c)
	}
	m.store.Release(id)
}

// Loaded reports whether this manager holds the harness in memory (it ran or read it).
func (m *Manager) Loaded(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.harnesses[id]
	return ok
}

// newHarnessID makes harness ids: "h-" + UTC date and time + 6 random hex digits, which sort by
// creation time and do not collide in practice.
func newHarnessID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "h-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}
