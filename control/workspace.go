package control

import (
	"errors"
	"slices"
	"time"

	"github.com/harness-edge/harness-edge/runtime/harness"
)

// A queued harness whose workspace another harness holds (in this daemon or in any other
// process) is not failed: it stays in the queue, in its place, and the scheduler passes over it
// to the ones behind it. It is tried again when a run of this daemon ends (it may have held the
// workspace) and every WorkspaceRetry (a holder in another process tells nobody when it ends).

// WorkspaceRetry is how often the daemon tries again a harness waiting for its workspace.
var WorkspaceRetry = 500 * time.Millisecond

// blockedRun is a queued harness waiting for its workspace: until when it is passed over, and
// who held the workspace when it was last tried.
type blockedRun struct {
	until  time.Time
	holder string
}

// waitForWorkspace puts a harness whose Run was refused for a busy workspace back at the head
// of the queue, passed over until WorkspaceRetry from now.
func (s *Server) waitForWorkspace(id string, err error) {
	holder := err.Error()
	var be *harness.WorkspaceBusyError
	if errors.As(err, &be) {
		holder = be.Workspace + " is held by another harness"
		if be.Holder.PID != 0 {
			holder = be.Workspace + " is held by " + be.Holder.String()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return // the next daemon queues it again
	}
	if prev, ok := s.blocked[id]; !ok || prev.holder != holder {
		s.log.Info("waiting for its workspace", "harness", id, "workspace", holder)
	}
	s.blocked[id] = blockedRun{until: time.Now().Add(WorkspaceRetry), holder: holder}
	if !slices.Contains(s.queue, id) { // (it is still in s.running: this is its run ending)
		s.queue = append([]string{id}, s.queue...)
	}
	time.AfterFunc(WorkspaceRetry, s.kick)
}

// isBlockedLocked reports whether the scheduler passes over a queued harness for now. s.mu held.
func (s *Server) isBlockedLocked(id string) bool {
	b, ok := s.blocked[id]
	return ok && time.Now().Before(b.until)
}

// unblockAllLocked lets every waiting harness be tried at once (a run ended). s.mu held.
func (s *Server) unblockAllLocked() {
	for id, b := range s.blocked {
		b.until = time.Time{}
		s.blocked[id] = b
	}
}

// waitingLocked says which queued harnesses wait for a workspace, and for whom; retrying are
// those the scheduler is trying again now. s.mu held.
func (s *Server) waitingLocked(retrying []string) map[string]string {
	var out map[string]string
	for id, b := range s.blocked {
		if slices.Contains(s.queue, id) || slices.Contains(retrying, id) {
			if out == nil {
				out = map[string]string{}
			}
			out[id] = b.holder
		}
	}
	return out
}
