package harness

import (
	"errors"
	"fmt"
	"strings"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// ReasonDiskFull begins the status reason of a harness paused because its store's disk was
// full. A daemon resumes such a harness by itself once there is room again; without a daemon,
// `resume` does.
const ReasonDiskFull = "disk full"

// PausedForDiskFull says whether st is paused because its store's disk was full.
func PausedForDiskFull(st *statefmt.HarnessState) bool {
	return st.Status == statefmt.StatusPaused && strings.HasPrefix(st.StatusReason, ReasonDiskFull)
}

// pauseForDiskFullLocked handles a checkpoint the store refused for want of room (cause). The
// refused checkpoint changed the state in memory only, so the harness goes back to its last
// acknowledged checkpoint, as after a crash (the step in flight runs again), and pauses there:
// a settling checkpoint may use the room the store keeps in reserve. It returns an error that
// matches both ErrPaused and store.ErrDiskFull, or cause when even the pause could not be
// written (the harness is then interrupted, and recovered like after a crash). h.mu held.
func (h *Harness) pauseForDiskFullLocked(cause error) error {
	st, err := h.m.store.Restore(h.ID())
	if err != nil {
		return fmt.Errorf("%w (and its last checkpoint could not be read back: %v)", cause, err)
	}
	h.st, h.pending, h.cpReason = st, nil, ""
	if PausedForDiskFull(h.st) {
		// Resumed while the disk is still full: its first checkpoint was refused, and it is
		// paused for that reason still.
		return fmt.Errorf("%w: %w", ErrPaused, cause)
	}
	if h.st.Status != statefmt.StatusRunning {
		return cause
	}
	var dfe *store.DiskFullError
	why := cause.Error()
	if errors.As(cause, &dfe) {
		why = fmt.Sprintf("%s has %d KiB free, a checkpoint needs %d KiB", dfe.Dir, dfe.Free>>10, dfe.Need>>10)
	}
	h.emit(event.Event{Type: event.Warning, Message: cause.Error()})
	if err := h.transitionLocked(statefmt.StatusPaused, ReasonDiskFull+": "+why); err != nil {
		return fmt.Errorf("%w (and the harness could not be paused: %v)", cause, err)
	}
	return fmt.Errorf("%w: %w", ErrPaused, cause)
}
