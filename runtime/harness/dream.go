package harness

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/harness-edge/harness-edge/statefmt/event"
)

// Dream Mode: unattended runs checkpoint at an interval even inside a long step.
//
// The rule, by autonomy level: gates stay where the level puts them (1–2 every step, 3 critical
// steps, 4–5 none); a gate pauses only its own harness, and the daemon goes on with the rest.
// The auto-checkpoint interval is the task's checkpoint.interval at levels 1–3, half of it at 4
// and a quarter at 5 (never below task.MinCheckpointInterval): the less a human watches, the
// less work a crash may take with it.

// DreamInterval is the auto-checkpoint interval of Dream Mode at an autonomy level.
func DreamInterval(autonomy int, interval time.Duration) time.Duration {
	switch {
	case autonomy >= 5:
		interval /= 4
	case autonomy == 4:
		interval /= 2
	}
	return max(interval, 100*time.Millisecond)
}

// dreamInterval is the harness's auto-checkpoint interval, 0 when Dream Mode is off.
func (h *Harness) dreamInterval() time.Duration {
	if !h.task.Dream && !h.m.dream {
		return 0
	}
	return DreamInterval(h.task.Autonomy, h.task.Checkpoint.Interval.Duration)
}

// startDream runs the auto-checkpoint timer of one step attempt. At every tick that finds no
// checkpoint written for an interval, it writes one (the state as committed, with the wall
// clock used so far) and tells the agent a save is due (StepContext.SaveDue), so a driver that
// can stop at a safe point saves its loop snapshot and the work so far. The returned function
// stops the timer.
func (h *Harness) startDream(interval time.Duration, due *atomic.Bool) func() {
	var mu sync.Mutex
	stopped := false
	var cancel func() bool
	var arm func(time.Duration)
	tick := func() {
		h.mu.Lock()
		next := interval
		if h.running && h.st.LastCheckpointAt != nil {
			if since := h.now().Sub(*h.st.LastCheckpointAt); since >= interval-interval/10 {
				due.Store(true)
				h.cpReason = "dream"
				if err := h.checkpoint(); err != nil {
					h.emit(event.Event{Type: event.Warning, Message: "Dream Mode auto-checkpoint: " + err.Error()})
				}
			} else {
				next = interval - since
			}
		}
		h.mu.Unlock()
		arm(next)
	}
	arm = func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			cancel = h.m.clock.AfterFunc(d, tick)
		}
	}
	arm(interval)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if cancel != nil {
			cancel()
		}
	}
}

// Governor decides whether the machine has room to start a step: it returns "" when it has,
// otherwise why not (for the event, `show` and the log).
type Governor interface {
	Check() string
}

// waitForRoom holds a step back while the governor says the machine is too busy, polling;
// the wait is evented and its reason persisted (visible in `show`). h.mu not held.
func (h *Harness) waitForRoom(ctx context.Context, stepID string) error {
	var since time.Time
	for {
		why := h.m.governor.Check()
		h.mu.Lock()
		if why == "" {
			if !since.IsZero() {
				h.st.StatusReason = ""
				h.emit(event.Event{Type: event.Governor, StepID: stepID, Action: "resumed", WaitMs: event.Ms(h.now().Sub(since))})
			}
			h.mu.Unlock()
			return nil
		}
		if since.IsZero() {
			since = h.now()
			h.st.StatusReason = "waiting for resources: " + why
			h.emit(event.Event{Type: event.Governor, StepID: stepID, Action: "waiting", Message: why})
			if err := h.checkpoint(); err != nil {
				h.mu.Unlock()
				return err
			}
		}
		h.mu.Unlock()
		if err := h.m.clock.Sleep(ctx, h.m.governorPoll); err != nil {
			return err
		}
	}
}
