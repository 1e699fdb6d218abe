package harness

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/gitrepo"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/runtime/tools"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// ErrPaused is returned by Run when the harness stopped in status paused (interrupted, or
// waiting for a human): its state is persisted and `resume` continues it.
var ErrPaused = errors.New("harness paused")

// Harness is one durable run of a task. Its state changes only in Run (one goroutine) and in the
// lifecycle methods, under mu; every change that matters is checkpointed before it is acted on.
type Harness struct {
	m    *Manager
	task *task.Task
	// taskJSON is stored with the next checkpoint (the first one) and then cleared.
	taskJSON []byte

	mu      sync.Mutex
	st      *statefmt.HarnessState
	pending []event.Event
	agents  map[string]agent.Agent
	running bool
	stop    context.CancelCauseFunc // cancels Run; its cause says why
	last    store.Checkpoint
	// runMark is when the wall-clock budget was last charged (zero when not running).
	runMark time.Time
	// cpReason marks the next checkpoint's event (a Dream Mode auto-checkpoint).
	cpReason string
	// pidx indexes st.Plan (see plan).
	pidx *planIndex
	// startDue says the running step's start is not checkpointed yet (see beginLocked).
	startDue bool
	// wsLock is a workspace lock taken before the harness was created, for Run to hold.
	wsLock *WorkspaceLock
	// repo is the workspace's git repository, with commits per step (see commits.go).
	repo *gitrepo.Repo
	// changed are the plan steps changed in place since the last checkpoint, when stepsKnown:
	// the store then compares only those with what it holds (store.Extras.Steps), so that a
	// checkpoint of a long plan does not cost a comparison of every step. Every change to a plan
	// step goes through touch (one step) or touchAll (not worth naming); builds with the
	// invariants tag check that none is left out.
	changed    []int
	stepsKnown bool
	// inflight is the checkpoint whose fsync is under way while the next step runs ahead (see
	// durableLocked); nil when the last checkpoint is durable.
	inflight *store.Checkpoint
}

// touch records that plan step i changed in place. h.mu held.
func (h *Harness) touch(i int) {
	if i >= 0 {
		h.changed = append(h.changed, i)
	}
}

// touchAll records that the plan changed in ways not worth naming step by step (a replan, a
// retry, a recovery): the next checkpoint compares every step. h.mu held.
func (h *Harness) touchAll() { h.stepsKnown = false }

// ID is the harness id.
func (h *Harness) ID() string { return h.st.HarnessID }

// Task is the harness's task definition.
func (h *Harness) Task() *task.Task { return h.task }

// State returns a deep copy of the harness's current state.
func (h *Harness) State() *statefmt.HarnessState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return cloneState(h.st)
}

// Output is OutputOf the harness's current state, read in place: a run's report does not copy
// the whole state (every tool call and output) to read its plan.
func (h *Harness) Output(path string) TaskOutput {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := OutputOf(h.st, path)
	for i := range o.Steps {
		s := &o.Steps[i]
		if s.Output != nil {
			out := *s.Output
			s.Output = &out
		}
		if s.Error != nil {
			msg := *s.Error
			s.Error = &msg
		}
	}
	return o
}

// Status is the harness's current status.
func (h *Harness) Status() statefmt.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st.Status
}

// LastCheckpoint describes the harness's newest checkpoint written by this process.
func (h *Harness) LastCheckpoint() store.Checkpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func cloneState(s *statefmt.HarnessState) *statefmt.HarnessState {
	b, err := statefmt.EncodeBinary(s)
	if err != nil {
		panic(fmt.Sprintf("runtime: state does not encode: %v", err)) // Validate runs before every persist
	}
	c, err := statefmt.DecodeBinaryOwned(b)
	if err != nil {
		panic(fmt.Sprintf("runtime: state does not decode: %v", err))
	}
	return c
}

func (h *Harness) now() time.Time { return h.m.clock.Now() }

// emit queues an event for the next checkpoint. h.mu held.
func (h *Harness) emit(e event.Event) {
	e.HarnessID = h.st.HarnessID
	if e.Time.IsZero() {
		e.Time = h.now()
	}
	h.pending = append(h.pending, e)
}

// checkpoint persists the state with the queued events (and the task, the first time) in one
// synced batch, then hands the events to the live sinks. h.mu held.
func (h *Harness) checkpoint() error { return h.persist(false) }

// persist is checkpoint; with ahead it returns once the batch is in the store's log, and the
// fsync goes on while the next step runs (see durableLocked). The store prepares the new
// checkpoint while the one in flight before it syncs, and writes it once that one is durable.
// h.mu held.
func (h *Harness) persist(ahead bool) error {
	now := h.now()
	if !h.runMark.IsZero() && h.st.Budget != nil {
		h.st.Budget.WallClockUsed += now.Sub(h.runMark)
		h.runMark = now
	}
	h.st.CheckpointCount++
	stamp := statefmt.Instant(now)
	h.st.LastCheckpointAt = &stamp
	h.st.UpdatedAt = stamp
	events := h.pending
	h.pending = nil
	cp, err := h.m.store.PersistWith(h.st, store.Extras{Events: events, Task: h.taskJSON,
		Checkpoint: &event.Event{Type: event.Checkpoint, HarnessID: h.st.HarnessID, Time: now, Reason: h.cpReason},
		Steps:      statefmt.StepChanges{Known: h.stepsKnown, Indexes: h.changed}, NoSyncWait: ahead})
	h.cpReason = ""
	if err != nil {
		h.st.CheckpointCount--
		return checkpointError(h.st.HarnessID, err)
	}
	h.taskJSON, h.startDue = nil, false
	h.changed, h.stepsKnown = h.changed[:0], true
	if err := h.durableLocked(); err != nil { // the store made it durable before writing cp
		return err
	}
	h.inflight = &cp
	if ahead {
		return nil
	}
	return h.durableLocked()
}

// checkpointError says that harness id's checkpoint failed. A commit the store refused names
// the harness and the checkpoint already.
func checkpointError(id string, err error) error {
	if ce := (*store.CommitError)(nil); errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("harness %s: checkpoint: %w", id, err)
}

// durableLocked waits until the checkpoint in flight is durable, makes it the last one and
// hands its events to the live sinks: nothing outside the process hears of a checkpoint before
// it is on the disk. A step runs ahead of its predecessor's fsync only when it can reach
// nothing outside the process before its own checkpoint (runsAheadLocked); everything else
// waits here first. h.mu held.
func (h *Harness) durableLocked() error {
	if h.inflight == nil {
		return nil
	}
	cp, err := h.inflight.Wait()
	h.inflight = nil
	if err != nil {
		return checkpointError(h.st.HarnessID, err)
	}
	h.last = cp
	for _, e := range cp.Events {
		for _, s := range h.m.sinks {
			s.Emit(e)
		}
	}
	return nil
}

// runsAheadLocked says whether step i may start while the previous checkpoint's fsync is under
// way. It may when what it does stays inside the process until it calls a tool that may reach
// outside: the in-process script driver of the harness's own agent (no sub-agent, no
// subprocess, no model), no tool hooks (they run commands), no commit of the workspace per
// step. Such a call waits for the fsync first (the tool pipeline asks stepAttempt.Durable). A
// crash before the fsync ends loses the step and the reads of the one that ran ahead; neither
// was announced, and both run again on resume. h.mu held.
func (h *Harness) runsAheadLocked(i int) bool {
	step := &h.st.Plan.Steps[i]
	if step.AssignedAgent != h.st.AgentName || len(h.m.hooks.Pre)+len(h.m.hooks.Post) > 0 ||
		len(h.task.Hooks.PreTool)+len(h.task.Hooks.PostTool) > 0 || h.commitsStepsLocked() || h.task.Workspace.Isolated() {
		return false
	}
	cfg, ok := h.task.Agents[step.AssignedAgent]
	return ok && cfg.Driver == "script"
}

// transitionLocked moves the harness to `to` and checkpoints. h.mu held.
func (h *Harness) transitionLocked(to statefmt.Status, reason string) error {
	undo, err := h.markLocked(to, reason)
	if err != nil {
		return err
	}
	if err := h.checkpoint(); err != nil {
		undo()
		return err
	}
	return nil
}

// markLocked moves the harness to `to` in memory, with its event, for the checkpoint that
// follows to record; undo puts the status back should that checkpoint fail. h.mu held.
func (h *Harness) markLocked(to statefmt.Status, reason string) (undo func(), _ error) {
	status, reason0, updated := h.st.Status, h.st.StatusReason, h.st.UpdatedAt
	ev, err := transition(h.st, to, reason, h.now())
	if err != nil {
		return nil, err
	}
	h.emit(ev)
	return func() { h.st.Status, h.st.StatusReason, h.st.UpdatedAt = status, reason0, updated }, nil
}

// recordToolCall adds a call to its attempt, with its event; executed says whether it ran
// (refusals are recorded but do not count against the budget).
func (h *Harness) recordToolCall(cur *attemptState, r statefmt.ToolCallRecord, executed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := r.Result.Success
	cur.records = append(cur.records, r)
	cur.events = append(cur.events, event.Event{Type: event.ToolCall, HarnessID: h.ID(), Tool: r.CallName,
		DurationMs: event.Ms(r.Duration), Success: &ok, Message: r.Result.Error, Attempt: r.RetryCount,
		Time: r.Timestamp.Add(r.Duration)})
	if executed {
		cur.executed++
	}
}

func (h *Harness) agent(name string) (agent.Agent, error) {
	if a, ok := h.agents[name]; ok {
		return a, nil
	}
	cfg, ok := h.task.Agents[name]
	if !ok {
		return nil, fmt.Errorf("the task has no agent %s", name)
	}
	a, err := newAgent(name, cfg)
	if err != nil {
		return nil, err
	}
	h.agents[name] = a
	return a, nil
}

// errStopped is the cause Manager.Stop gives Run's context (any other cancellation pauses).
var errStopped = errors.New("stopped by request")

// ErrWaiting is returned by Run when the harness stopped at a human gate (it is paused, with
// the gate pending): approve or reject the gate, then resume it.
var ErrWaiting = fmt.Errorf("%w: waiting for a human", ErrPaused)

// suspended is a step attempt that stopped at a gate (its own, or a sub-agent's).
type suspended struct{ reason string }

func (s *suspended) Error() string { return s.reason }

// attemptState is what one step attempt has done so far; the attempt's ToolCaller and token
// reports write to it (under h.mu). It joins the harness state when the attempt ends; an
// attempt cut short (interrupt, crash, gate) is forgotten whole and runs again.
type attemptState struct {
	step     string
	records  []statefmt.ToolCallRecord
	events   []event.Event
	executed int   // tool calls that ran (refusals are recorded but not counted)
	tokens   int64 // model tokens the agent reported
	cost     int64 // what the agent reported spending, in millionths of a dollar
	occ      map[string]int
	// iterations the agent counted (StepContext.CountIteration) since the last Save; counted
	// says whether it ever did.
	iterations int
	counted    bool
}

// Run executes the harness until it completes, fails, is paused or waits for a human. It starts
// a created harness and continues a paused or interrupted one (see Manager.ResumeFromCheckpoint).
// Cancelling ctx pauses the harness cleanly: the step in flight is put back, the state
// persisted, and Run returns ErrPaused. At a human gate it returns ErrWaiting. It returns nil
// when the harness completed or failed (see Status).
func (h *Harness) Run(ctx context.Context) error {
	if g := h.m.pendingGates(h); len(g) > 0 && h.Status() == statefmt.StatusPaused {
		return fmt.Errorf("%w: %s", ErrWaiting, describeGates(g))
	}
	h.mu.Lock()
	if h.running {
		h.mu.Unlock()
		return fmt.Errorf("harness %s is already running", h.ID())
	}
	release, err := h.holdWorkspaceLocked()
	if err != nil {
		h.mu.Unlock()
		return err
	}
	defer release()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h.running, h.stop, h.runMark = true, cancel, h.now()
	defer func() {
		h.mu.Lock()
		h.running, h.stop, h.runMark = false, nil, time.Time{}
		h.mu.Unlock()
	}()
	err = h.startLocked(ctx)
	h.mu.Unlock()
	if err != nil {
		return h.settleDiskFull(err)
	}
	for {
		delay, done, err := h.step(ctx)
		if done {
			h.mu.Lock()
			if derr := h.durableLocked(); derr != nil {
				err = derr
			}
			h.mu.Unlock()
			return h.settleDiskFull(err)
		}
		if delay > 0 && h.m.clock.Sleep(ctx, delay) != nil {
			return h.halt(ctx)
		}
	}
}

// settleDiskFull pauses the harness when err is a checkpoint refused for want of room, and
// returns err otherwise.
func (h *Harness) settleDiskFull(err error) error {
	if !errors.Is(err, store.ErrDiskFull) || errors.Is(err, ErrPaused) {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pauseForDiskFullLocked(err)
}

// step runs one attempt of the next ready step and records its outcome durably. done says
// that Run ends with err; otherwise Run waits delay (a retry's backoff) and goes on.
func (h *Harness) step(ctx context.Context) (delay time.Duration, done bool, err error) {
	if ctx.Err() != nil {
		return 0, true, h.halt(ctx)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i, ok, err := h.nextLocked(ctx)
	if !ok {
		return 0, true, err
	}
	if !h.runsAheadLocked(i) {
		if err := h.durableLocked(); err != nil {
			return 0, true, err
		}
	}
	if h.m.governor != nil {
		id := h.st.Plan.Steps[i].ID
		h.mu.Unlock()
		err := h.waitForRoom(ctx, id)
		h.mu.Lock()
		if ctx.Err() != nil {
			return 0, true, h.haltLocked(ctx)
		}
		if err != nil {
			return 0, true, err
		}
	}
	at, err := h.beginLocked(ctx, i)
	if err != nil {
		return 0, true, err
	}
	h.mu.Unlock()
	out, err, use := at.perform()
	h.mu.Lock()
	return h.settleLocked(ctx, at, out, err, use)
}

// nextLocked picks the next ready step and checks that it may start (budget, gate). Without
// one, it reports ok false with Run's result: the plan finished, or the harness stopped at a
// gate or a used-up budget. A step whose gate a human rejected is first given to the owner
// agent to replan, when it replans by itself (ownerReplanLocked). h.mu held.
func (h *Harness) nextLocked(ctx context.Context) (i int, ok bool, err error) {
	if h.st.Status != statefmt.StatusRunning { // failed while starting
		return 0, false, nil
	}
	i = h.plan().next()
	if i < 0 {
		return 0, false, h.finishLocked()
	}
	step := &h.st.Plan.Steps[i]
	if be := h.overBudgetLocked(nil); be != nil {
		return 0, false, h.budgetStopLocked(step, be)
	}
	if replanned, err := h.ownerReplanLocked(ctx, i); err != nil || h.st.Status != statefmt.StatusRunning {
		return 0, false, err
	} else if replanned {
		return h.nextLocked(ctx)
	}
	if gated, err := h.gateLocked(step); gated {
		return 0, false, err
	}
	return i, true, nil
}

// runningAttempt is a step attempt under way: what runs it, and what it has done so far.
type runningAttempt struct {
	index   int
	attempt int // counts from 1
	cur     *attemptState
	host    *stepAttempt
	run     func() (string, error)
	// cancelStart stops the timer that checkpoints the start (nil when there is none).
	cancelStart func() bool
}

// perform runs the attempt (with Dream Mode's timer when it is on) and measures its CPU time
// and the memory after it. h.mu not held.
func (at *runningAttempt) perform() (string, error, event.Event) {
	h := at.host.h
	cpu0 := cpuTime()
	stopDream := func() {}
	if iv := h.dreamInterval(); iv > 0 {
		stopDream = h.startDream(iv, &at.host.saveDue)
	}
	out, err := at.run()
	stopDream()
	return out, err, event.Event{CPUMs: event.Ms(cpuTime() - cpu0), RSSBytes: rssBytes()}
}

// beginLocked marks step i running, durably (step_started, the phase boundary if one is
// crossed), and prepares its attempt: the agent with its StepContext, or a sub-agent. h.mu held.
func (h *Harness) beginLocked(ctx context.Context, i int) (*runningAttempt, error) {
	step := &h.st.Plan.Steps[i]
	if step.Phase != h.st.Phase {
		h.enterPhaseLocked(step.Phase)
	}
	// The loop snapshot belongs to the step at CurrentStepIndex: an attempt of it that was
	// cut short saved it, and the step goes on from there.
	var resume *statefmt.AgentLoopSnapshot
	if h.st.AgentLoopSnapshot != nil && h.st.CurrentStepIndex == i {
		resume = cloneLoop(h.st.AgentLoopSnapshot)
	} else {
		h.st.AgentLoopSnapshot = nil
	}
	step.Status, h.st.CurrentStepIndex = statefmt.StepRunning, i
	h.touch(i)
	at := &runningAttempt{index: i, attempt: step.Attempts + 1, cur: &attemptState{step: step.ID, occ: map[string]int{}}}
	at.host = &stepAttempt{h: h, cur: at.cur}
	h.emit(event.Event{Type: event.StepStarted, StepID: step.ID, Attempt: at.attempt})
	// The start needs no checkpoint of its own: after a crash the step runs again whole either
	// way. It is written with the outcome when the step ends within m.startCP, by the first
	// checkpoint the attempt makes before that (a journaled call, a save), or after m.startCP,
	// so that a long step shows as running.
	if h.m.startCP < 0 {
		if err := h.checkpoint(); err != nil {
			return nil, err
		}
	} else {
		h.startDue = true
		at.cancelStart = h.m.clock.AfterFunc(h.m.startCP, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.startDue && h.running {
				if err := h.checkpoint(); err != nil {
					h.emit(event.Event{Type: event.Warning, StepID: step.ID, Message: "checkpoint of the step's start: " + err.Error()})
				}
			}
		})
	}
	if step.AssignedAgent != h.st.AgentName {
		at.run = func() (string, error) { return h.runChild(ctx, i) }
		return at, nil
	}
	switch a, err := h.agent(step.AssignedAgent); {
	case err != nil:
		at.run = func() (string, error) { return "", err }
	default:
		sc := &agent.StepContext{HarnessID: h.ID(), Task: h.task, AgentName: step.AssignedAgent, Step: *step, Attempt: at.attempt,
			Inputs: stepInputs(h.plan(), step), Workspace: h.task.Workspace.Path, Clock: h.m.clock, Resume: resume,
			Tools: &tools.Pipeline{Task: h.task, Clock: h.m.clock, Hooks: h.m.hooks, HarnessID: h.ID(), StepID: step.ID,
				Agent: step.AssignedAgent, Session: at.host},
			ReportTokens: at.host.reportTokens, ReportCost: at.host.reportCost, Host: at.host, LogDir: h.m.logDir, InboxDir: h.m.inboxDir}
		at.run = func() (string, error) { return a.RunStep(ctx, sc) }
	}
	return at, nil
}

// settleLocked records how an attempt ended, durably: cut short (put back whole, to run again),
// suspended at a gate or by the agent (paused), stopped by a budget, or finished (completed,
// to be retried after delay, or failed). h.mu held.
func (h *Harness) settleLocked(ctx context.Context, at *runningAttempt, out string, err error, use event.Event) (delay time.Duration, done bool, _ error) {
	if at.cancelStart != nil {
		at.cancelStart()
	}
	step := &h.st.Plan.Steps[at.index]
	h.touch(at.index) // every branch below may change it
	var susp *suspended
	var be *agent.BudgetError
	var pe *agent.PauseError
	switch {
	case ctx.Err() != nil:
		// Cut short: the attempt does not count and is forgotten; it runs again, whole, on
		// resume (side-effecting calls answer from the journal).
		step.Status = statefmt.StepReady
		return 0, true, h.haltLocked(ctx)
	case errors.As(err, &susp):
		step.Status = statefmt.StepReady
		if err := h.transitionLocked(statefmt.StatusPaused, "waiting for a human: "+susp.reason); err != nil {
			return 0, true, err
		}
		return 0, true, ErrWaiting
	case errors.As(err, &pe):
		// The agent stopped for a human to look (its circuit breaker): the attempt is put
		// back as at a gate, its snapshot kept, and resume goes on from it.
		step.Status = statefmt.StepReady
		if err := h.transitionLocked(statefmt.StatusPaused, pe.Reason); err != nil {
			return 0, true, err
		}
		return 0, true, ErrPaused
	case errors.As(err, &be):
		if h.task.Autonomy >= 4 { // the step fails here: its attempt is history
			h.endAttemptLocked(at.cur)
			step.Attempts = at.attempt
		}
		return 0, true, h.budgetStopLocked(step, be)
	}
	h.endAttemptLocked(at.cur)
	step.Attempts = at.attempt
	var commit string
	if err == nil {
		commit, err = h.commitStepLocked(step.ID) // with commit: step; a failure fails the step
	}
	switch {
	case err == nil:
		h.plan().complete(step.ID, out)
		h.emit(event.Event{Type: event.StepCompleted, StepID: step.ID, Attempt: at.attempt, CPUMs: use.CPUMs, RSSBytes: use.RSSBytes, Message: commitNote(commit)})
	case agent.IsTransient(err) && at.attempt <= h.task.Retry.Retries():
		msg := err.Error()
		step.Status, step.Error = statefmt.StepReady, &msg
		delay = h.backoff(step.ID, at.attempt)
		h.emit(event.Event{Type: event.StepRetry, StepID: step.ID, Attempt: at.attempt, Message: msg, DelayMs: float64(delay.Milliseconds()), CPUMs: use.CPUMs, RSSBytes: use.RSSBytes})
	default:
		msg := err.Error()
		if agent.IsTransient(err) {
			msg = fmt.Sprintf("%s (after %s)", msg, idlist.Of(at.attempt, "attempt"))
		}
		blocked := h.plan().fail(step.ID, msg)
		h.emit(event.Event{Type: event.StepFailed, StepID: step.ID, Attempt: at.attempt, Message: msg, Blocked: blocked, CPUMs: use.CPUMs, RSSBytes: use.RSSBytes})
	}
	undo := func() {}
	ended := false
	if !h.task.Workspace.Isolated() && h.plan().next() < 0 {
		// Nothing is left to run, and nothing runs before the harness ends (no worktree to
		// merge): the step's checkpoint ends the harness too, one checkpoint where there were
		// two.
		if u, err := h.markLocked(h.outcomeLocked()); err == nil {
			undo, ended = u, true
		}
	}
	// The next step may run while this checkpoint's fsync is under way (see durableLocked),
	// unless the harness ends here or waits out a backoff.
	if err := h.persist(!ended && delay == 0); err != nil {
		undo()
		return 0, true, err
	}
	return delay, ended, nil
}

// commitLocked adds a finished attempt's calls, events and tokens to the state, and drops its
// side-effect journal (its calls are in the history now). h.mu held.
func (h *Harness) commitLocked(cur *attemptState) {
	if cur == nil {
		return
	}
	h.st.ToolCallHistory = append(h.st.ToolCallHistory, cur.records...)
	h.st.TotalToolCalls += cur.executed
	h.st.Iterations += cur.iterations
	h.pending = append(h.pending, cur.events...)
	if h.st.Budget != nil {
		h.st.Budget.TokensUsed += cur.tokens
		h.st.Budget.CostMicroUSDUsed += cur.cost
	}
	for _, e := range h.st.SideEffects {
		if e.StepID == cur.step && e.Result == nil {
			// The re-run did not make this call again (an agent that is not deterministic): it
			// may have run before the interruption, and nobody will know but from this warning.
			h.pending = append(h.pending, event.Event{Type: event.Warning, HarnessID: h.ID(), Time: h.now(), StepID: e.StepID, Tool: e.Tool,
				Message: fmt.Sprintf("side-effecting call %s %s may have run before an interruption; the step's re-run did not make it again", e.Tool, e.Arguments)})
		}
	}
	h.st.SideEffects = slices.DeleteFunc(h.st.SideEffects, func(e statefmt.SideEffect) bool { return e.StepID == cur.step })
	if len(h.st.SideEffects) == 0 {
		h.st.SideEffects = nil
	}
}

// endAttemptLocked commits an attempt that ended (completed, failed, or to be retried afresh):
// its loop snapshot goes, and an attempt whose agent counted no iterations counts one. h.mu held.
func (h *Harness) endAttemptLocked(cur *attemptState) {
	if !cur.counted {
		cur.iterations++
	}
	h.commitLocked(cur)
	h.st.AgentLoopSnapshot = nil
}

// saveLoop is StepContext.Save: the attempt's calls, events and tokens so far are committed and
// loop becomes the snapshot, in one checkpoint. If the checkpoint fails, what was committed stays
// in memory and goes with the next one.
func (h *Harness) saveLoop(cur *attemptState, loop *statefmt.AgentLoopSnapshot) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commitLocked(cur)
	cur.records, cur.events, cur.executed, cur.tokens, cur.cost, cur.iterations, cur.occ = nil, nil, 0, 0, 0, 0, map[string]int{}
	h.st.AgentLoopSnapshot = cloneLoop(loop)
	return h.checkpoint()
}

// askLocked is StepContext.AskHuman. h.mu held.
func (h *Harness) askLocked(stepID, kind, why string) error {
	var last *statefmt.Gate
	for i := range h.st.Gates {
		if g := &h.st.Gates[i]; g.Kind == kind && g.StepID == stepID {
			last = g
		}
	}
	switch {
	case last == nil:
		last = h.addGateLocked(kind, stepID, why)
	case last.Status == statefmt.GateApproved:
		return nil
	case last.Status == statefmt.GateRejected:
		return &agent.RejectedError{GateID: last.ID, Reason: last.Reason}
	}
	return &suspended{DescribeGate(last.ID, last.Kind, last.StepID) + ": " + why}
}

// cloneLoop deep-copies a loop snapshot (the agent goes on changing its own).
func cloneLoop(l *statefmt.AgentLoopSnapshot) *statefmt.AgentLoopSnapshot {
	c := *l
	c.Messages = slices.Clone(l.Messages)
	for i := range c.Messages {
		c.Messages[i].ToolCalls = slices.Clone(c.Messages[i].ToolCalls)
	}
	c.Handoff, c.Data = slices.Clone(l.Handoff), slices.Clone(l.Data)
	return &c
}

// stepInputs are the outputs of the steps step depends on.
func stepInputs(x *planIndex, step *statefmt.ExecutionStep) []agent.StepInput {
	var in []agent.StepInput
	for _, d := range step.Dependencies {
		if i := x.step(d); i >= 0 && x.p.Steps[i].Output != nil {
			in = append(in, agent.StepInput{StepID: d, Output: *x.p.Steps[i].Output})
		}
	}
	return in
}

// plan is the index of the harness's plan, made once per plan. h.mu held.
func (h *Harness) plan() *planIndex {
	if h.pidx == nil || h.pidx.p != h.st.Plan {
		h.pidx = indexPlan(h.st.Plan)
		h.pidx.touched = h.touch
	}
	return h.pidx
}

// backoff is the wait before retry number `attempt` of a step: the attempt-th wait of a jitter
// sequence seeded by the harness and step ids, so that across attempts (and restarts) each wait
// is at least factor times the one before, as for tool calls.
func (h *Harness) backoff(stepID string, attempt int) time.Duration {
	f := fnv.New64a()
	f.Write([]byte(h.ID() + "\x00" + stepID))
	r := rand.New(rand.NewPCG(f.Sum64(), 0))
	var d time.Duration
	for range attempt {
		d = tools.NextDelay(h.task.Retry, d, r.Float64())
	}
	return d
}

// startLocked moves a created harness to running and plans it; a paused one to running; an
// interrupted one (running in the store, nobody running it) is continued. h.mu held.
func (h *Harness) startLocked(ctx context.Context) error {
	interrupted := h.st.Status == statefmt.StatusRunning
	undo := func() {} // of a transition the start's checkpoint records, below
	switch h.st.Status {
	case statefmt.StatusCreated, statefmt.StatusPaused:
		if h.st.Plan != nil && !h.commitsStepsLocked() {
			// Nothing runs between the transition and the start's checkpoint (no agent plans,
			// no workspace is synced): one checkpoint records both, where there were two.
			u, err := h.markLocked(statefmt.StatusRunning, "")
			if err != nil {
				return err
			}
			undo = u
		} else if err := h.transitionLocked(statefmt.StatusRunning, ""); err != nil {
			return err
		}
	case statefmt.StatusRunning:
		h.emit(event.Event{Type: event.Warning, Message: "continuing after an interruption (the process that ran it stopped without pausing it)"})
	default:
		return transitionError(h.st, statefmt.StatusRunning)
	}
	// A step left running by a crash runs again from its start.
	h.touchAll()
	if h.st.Plan != nil {
		for i := range h.st.Plan.Steps {
			if s := &h.st.Plan.Steps[i]; s.Status == statefmt.StepRunning {
				s.Status = statefmt.StepReady
			}
		}
	}
	if h.st.Plan == nil {
		a, err := h.agent(h.task.Agent)
		if err != nil {
			return h.failLocked(err.Error())
		}
		h.mu.Unlock()
		steps, err := a.Plan(ctx, &agent.PlanContext{HarnessID: h.ID(), Task: h.task, Clock: h.m.clock})
		h.mu.Lock()
		if ctx.Err() != nil {
			return nil // Run halts
		}
		if err != nil {
			return h.failLocked("planning: " + err.Error())
		}
		p, err := newPlan(h.st.TaskID, steps, h.knownAgent, h.now())
		if err != nil {
			return h.failLocked(fmt.Sprintf("agent %s produced an %v", h.task.Agent, err))
		}
		h.st.Plan = p
	}
	h.plan().refreshAll()
	if err := h.syncWorkspaceLocked(interrupted); err != nil {
		return fmt.Errorf("harness %s: %w", h.ID(), err)
	}
	if err := h.checkpoint(); err != nil {
		undo()
		return err
	}
	return nil
}

func (h *Harness) knownAgent(name string) bool { _, ok := h.task.Agents[name]; return ok }

// failLocked fails the harness with a reason. h.mu held.
func (h *Harness) failLocked(reason string) error {
	return h.transitionLocked(statefmt.StatusFailed, reason)
}

// finishLocked ends a plan with nothing left to run: completed, or failed naming why. h.mu held.
func (h *Harness) finishLocked() error {
	return h.transitionLocked(h.outcomeLocked())
}

// outcomeLocked is how a plan with nothing left to run ends: completed (its phase and the plan
// reported completed, an isolated worktree merged), or failed naming why. h.mu held.
func (h *Harness) outcomeLocked() (statefmt.Status, string) {
	if planDone(h.st.Plan) {
		if h.st.Phase != "" {
			h.emit(event.Event{Type: event.Phase, Phase: h.st.Phase, Action: "completed"})
		}
		h.emit(event.Event{Type: event.PlanCompleted, Steps: len(h.st.Plan.Steps)})
		h.mergeWorktreeLocked()
		return statefmt.StatusCompleted, ""
	}
	return statefmt.StatusFailed, failureReason(h.st.Plan)
}

// failureReason is why a plan that cannot complete failed: its failed steps with their errors
// (the first idlist.Max), and the steps they blocked.
func failureReason(p *statefmt.ExecutionPlan) string {
	var why, blocked []string
	failed := 0
	for i := range p.Steps {
		switch s := &p.Steps[i]; s.Status {
		case statefmt.StepFailed:
			if failed++; failed <= idlist.Max {
				why = append(why, StepFailure(s.ID, deref(s.Error)))
			}
		case statefmt.StepBlocked:
			blocked = append(blocked, s.ID)
		}
	}
	if n := failed - idlist.Max; n > 0 {
		more := "and " + idlist.Count(n) + " more failed step"
		if n > 1 {
			more += "s"
		}
		why = append(why, more)
	}
	if len(blocked) > 0 {
		why = append(why, "blocked: "+idlist.Join(blocked, ", "))
	}
	return strings.Join(why, "; ")
}

// StepFailure is how a failed step is named with its error, in a failed harness's reason and in
// the report's list of failed steps alike (so that the one can be found in the other).
func StepFailure(id, msg string) string { return fmt.Sprintf("step %s failed: %s", id, msg) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// enterPhaseLocked moves the harness into the phase of the step about to start: the phase
// before it has completed (phases are dependencies, see task.PhaseDependencies). Both events are
// written with the step's start checkpoint, so the boundary is durable. h.mu held.
func (h *Harness) enterPhaseLocked(phase string) {
	if h.st.Phase != "" {
		h.emit(event.Event{Type: event.Phase, Phase: h.st.Phase, Action: "completed"})
	}
	h.st.Phase = phase
	if phase != "" {
		h.emit(event.Event{Type: event.Phase, Phase: phase, Action: "started"})
	}
}

// pauseRequest is the cause Run's context is cancelled with to pause the harness with a reason.
type pauseRequest struct{ reason string }

func (p *pauseRequest) Error() string { return "pause requested: " + p.reason }

// PauseCause is the cause to cancel Run's context with (context.WithCancelCause) to pause the
// harness with this reason, as Manager.Pause does. Unlike Manager.Pause it works before Run has
// started too: a Run given a context already cancelled so pauses at once.
func PauseCause(reason string) error { return &pauseRequest{reason} }

// halt ends Run after its context was cancelled: paused when interrupted (with the reason a
// pause request gave), failed when stopped.
func (h *Harness) halt(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.haltLocked(ctx)
}

// haltLocked is halt with h.mu held.
func (h *Harness) haltLocked(ctx context.Context) error {
	if h.st.Status != statefmt.StatusRunning {
		return nil
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, errStopped) {
		return h.stopLocked()
	}
	reason := "interrupted"
	if pr := (*pauseRequest)(nil); errors.As(cause, &pr) {
		reason = pr.reason
	}
	if err := h.transitionLocked(statefmt.StatusPaused, reason); err != nil {
		return err
	}
	return ErrPaused
}

// stopLocked ends the harness for good: completed when its plan is, failed otherwise. h.mu held.
func (h *Harness) stopLocked() error {
	return h.stopWithLocked("stopped by request")
}

// stopWithLocked is stopLocked failing with reason. h.mu held.
func (h *Harness) stopWithLocked(reason string) error {
	if h.st.Status == statefmt.StatusCreated {
		if err := h.transitionLocked(statefmt.StatusRunning, ""); err != nil {
			return err
		}
	}
	if h.st.Plan != nil {
		if planDone(h.st.Plan) && h.st.Status == statefmt.StatusRunning {
			return h.transitionLocked(statefmt.StatusCompleted, "")
		}
		h.touchAll()
		for i := range h.st.Plan.Steps {
			if s := &h.st.Plan.Steps[i]; s.Status == statefmt.StepRunning {
				s.Status = statefmt.StepReady
			}
		}
	}
	return h.failLocked(reason)
}

// Store is the store the harness checkpoints to.
func (h *Harness) Store() Store { return h.m.store }
