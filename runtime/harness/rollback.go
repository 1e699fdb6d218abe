package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// CourseCheckpoint and CourseRollback are the actions of the course events that name a
// checkpoint and roll a harness back to one.
const (
	CourseCheckpoint = "checkpoint"
	CourseRollback   = "rollback"
)

// RollbackResult says what a rollback did.
type RollbackResult struct {
	HarnessID string `json:"harnessId"`
	// To is the checkpoint rolled back to as a request names one: its name, or its sequence
	// number in decimal (CheckpointLabel words it for a sentence).
	To     string          `json:"to"`
	Status statefmt.Status `json:"status"`
	// StepsDone of Steps have completed in the state rolled back to.
	StepsDone int `json:"stepsDone"`
	Steps     int `json:"steps"`
}

// Rollback makes an earlier state of the harness (to: a named checkpoint, or a checkpoint of
// its chain; point names it as a request does, a name or a sequence number) its newest
// checkpoint. The chain stays append-only: the
// rollback is a new checkpoint, with a course event saying who rolled back to what and why.
// The harness is paused afterwards (created when it had not started), so that resume goes on
// from there: the steps after the point run again. The budget used stays as it is now (what
// was spent is spent), and the checkpoint count goes on. taskJSON, when given, is the task the
// harness had at the point (a replan may have changed its script actions since): it becomes
// the harness's task again. Refused, changing nothing: a running
// harness, a sub-agent (roll back its parent), a state of another harness.
func (m *Manager) Rollback(id string, to *statefmt.HarnessState, taskJSON []byte, point, by, reason string) (RollbackResult, error) {
	label := CheckpointLabel(point)
	h, err := m.Get(id)
	if err != nil {
		return RollbackResult{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.st
	switch {
	case st.ParentHarnessID != "":
		return RollbackResult{}, fmt.Errorf("harness %s %w of %s: roll back %s", id, ErrSubAgent, st.ParentHarnessID, st.ParentHarnessID)
	case h.running || st.Status == statefmt.StatusRunning:
		return RollbackResult{}, fmt.Errorf("harness %s %w: pause it first (`harness-edge pause %s`), then roll it back", id, ErrRunning, id)
	case to.HarnessID != id:
		return RollbackResult{}, fmt.Errorf("harness %s: the state to roll back to is harness %s's", id, to.HarnessID)
	}
	var t *task.Task
	if taskJSON != nil && !bytes.Equal(taskJSON, h.taskJSONNow()) {
		if t, err = task.Parse("the task at "+label, taskJSON); err != nil {
			return RollbackResult{}, fmt.Errorf("harness %s: %w", id, err)
		}
	}
	saved, pending0, task0, json0, agents0 := st, len(h.pending), h.task, h.taskJSON, h.agents
	n := cloneState(to)
	n.CreatedAt, n.CheckpointCount, n.LastCheckpointAt = st.CreatedAt, st.CheckpointCount, st.LastCheckpointAt
	if st.Budget != nil {
		b := *st.Budget
		n.Budget = &b
	}
	now := h.now()
	what := fmt.Sprintf("rolled back to %s by %s", label, orNone(by))
	if reason != "" {
		what += ": " + reason
	}
	status := statefmt.StatusPaused
	if n.Status == statefmt.StatusCreated {
		status = statefmt.StatusCreated
	}
	n.Status, n.StatusReason, n.UpdatedAt = status, what+"; resume to go on from there", now
	h.emit(event.Event{Type: event.Course, Action: CourseRollback, By: by, Reason: reason, Message: "to " + label})
	if status != st.Status {
		h.emit(event.Event{Type: event.StateTransition, Time: now, From: st.Status, To: status, Reason: what})
	}
	h.st, h.pidx = n, nil
	h.touchAll()
	if t != nil {
		h.task, h.taskJSON, h.agents = t, taskJSON, map[string]agent.Agent{}
	}
	// The store's encoder of this harness builds on the history growing; it shrank.
	h.m.store.Release(id)
	statefmt.Normalize(n)
	if err := n.Validate(); err != nil {
		h.st, h.pending, h.task, h.taskJSON, h.agents, h.pidx = saved, h.pending[:pending0], task0, json0, agents0, nil
		return RollbackResult{}, fmt.Errorf("harness %s: the state to roll back to is not valid: %w", id, err)
	}
	if err := h.checkpoint(); err != nil {
		h.st, h.pending, h.task, h.taskJSON, h.agents, h.pidx = saved, h.pending[:pending0], task0, json0, agents0, nil
		return RollbackResult{}, err
	}
	res := RollbackResult{HarnessID: id, To: point, Status: n.Status}
	if n.Plan != nil {
		res.Steps = len(n.Plan.Steps)
		for _, s := range n.Plan.Steps {
			if s.Status == statefmt.StepCompleted {
				res.StepsDone++
			}
		}
	}
	return res, nil
}

// CheckpointState is the state to keep under a name: the harness's newest checkpoint, which
// must not be running (a running harness's state moves on). It returns the state.
func (m *Manager) CheckpointState(id string) (*statefmt.HarnessState, error) {
	h, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.st.ParentHarnessID != "":
		return nil, fmt.Errorf("harness %s %w of %s: name a checkpoint of %s", id, ErrSubAgent, h.st.ParentHarnessID, h.st.ParentHarnessID)
	case h.running || h.st.Status == statefmt.StatusRunning:
		return nil, fmt.Errorf("harness %s %w: pause it first (`harness-edge pause %s`), then name its checkpoint", id, ErrRunning, id)
	}
	return cloneState(h.st), nil
}

// taskJSONNow is the harness's task as JSON (as the store keeps it). h.mu held.
func (h *Harness) taskJSONNow() []byte {
	b, _ := json.Marshal(h.task)
	return b
}

// CheckpointLabel words a checkpoint named as a request names it (a sequence number, or a name)
// for a sentence: "checkpoint 17", or the name quoted.
func CheckpointLabel(point string) string {
	if _, err := strconv.ParseUint(point, 10, 64); err == nil {
		return "checkpoint " + point
	}
	return strconv.Quote(point)
}
