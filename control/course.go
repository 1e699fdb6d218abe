package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/inbox"
	"github.com/harness-edge/harness-edge/runtime/itlog"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// The operations that change a harness's course (retry, ...) and remove harnesses (delete,
// prune): the server's side, the client's side and their HTTP routes.

// RetryRequest is the body of POST /v1/harnesses/{id}/retry.
type RetryRequest struct {
	// Step is the one failed step to retry ("" retries every failed step).
	Step   string `json:"step,omitempty"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// MaxBy and MaxReason bound the human's name and reason a change of course records: the
// reason goes into the harness's event log (whose events are at most 1 MiB) and its status
// reason; a reason is a message to people, as a message told to an agent is (inbox.MaxBytes).
const (
	MaxBy     = 256
	MaxReason = inbox.MaxBytes
)

// checkWords refuses a name or a reason over its limit, or that is not UTF-8 text (the state
// that records it could not be encoded), before anything changes.
func checkWords(by, reason string) error {
	switch {
	case len(by) > MaxBy:
		return badInput("\"by\" is %d bytes, over the %d-byte limit", len(by), MaxBy)
	case len(reason) > MaxReason:
		return badInput("the reason is %d bytes, over the %d-byte limit", len(reason), MaxReason)
	}
	for _, w := range []struct{ what, text string }{{`"by"`, by}, {"the reason", reason}} {
		if i := task.InvalidUTF8([]byte(w.text)); i >= 0 {
			return badInput("%s is not UTF-8: the byte 0x%02X at byte offset %d is not valid UTF-8", w.what, w.text[i], i)
		}
	}
	return nil
}

// Retry takes a failed harness (or one failed step) back to runnable (harness.Manager.Retry).
func (s *Server) Retry(_ context.Context, id string, req RetryRequest) (harness.RetryResult, error) {
	if err := store.ValidID(id); err != nil {
		return harness.RetryResult{}, err
	}
	if err := checkWords(req.By, req.Reason); err != nil {
		return harness.RetryResult{}, err
	}
	defer s.forget(id)()
	s.mu.Lock()
	busy := s.scheduledLocked(id, "retry")
	s.mu.Unlock()
	if busy != nil {
		return harness.RetryResult{}, busy
	}
	return s.m.Retry(id, req.Step, req.By, req.Reason)
}

func (c *Client) Retry(ctx context.Context, id string, req RetryRequest) (harness.RetryResult, error) {
	if err := checkWords(req.By, req.Reason); err != nil { // JSON would carry a byte that is not UTF-8 as U+FFFD
		return harness.RetryResult{}, err
	}
	var r harness.RetryResult
	err := c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/retry", req, &r)
	return r, err
}

// courseRoutes adds the course and removal endpoints to the API's mux.
func courseRoutes(mux *http.ServeMux, h *handler) {
	mux.HandleFunc("POST /v1/harnesses/{id}/retry", h.retry)
	mux.HandleFunc("POST /v1/harnesses/{id}/replan", h.replan)
	mux.HandleFunc("POST /v1/harnesses/{id}/checkpoints", h.checkpoint)
	mux.HandleFunc("GET /v1/harnesses/{id}/checkpoints", h.checkpoints)
	mux.HandleFunc("POST /v1/harnesses/{id}/rollback", h.rollback)
	mux.HandleFunc("DELETE /v1/harnesses/{id}", h.delete)
	mux.HandleFunc("POST /v1/prune", h.prune)
}

// failCourse maps a course operation's error to its status code: a request the harness's
// state refuses is a conflict.
func failCourse(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, task.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, err)
		return
	case errors.Is(err, harness.ErrRunning), errors.Is(err, ErrQueued), errors.Is(err, harness.ErrNothingToRetry), errors.Is(err, harness.ErrNothingToReplan), errors.Is(err, harness.ErrSubAgent), errors.Is(err, ErrNeedsForce),
		errors.Is(err, store.ErrNameTaken):
		writeError(w, http.StatusConflict, err)
		return
	case errors.Is(err, harness.ErrUnknownStep), errors.Is(err, ErrBadInput):
		writeError(w, http.StatusBadRequest, err)
		return
	}
	fail(w, err)
}

func (h *handler) retry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidID(id); err != nil {
		fail(w, err)
		return
	}
	var req RetryRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	res, err := h.api.Retry(r.Context(), id, req)
	if err != nil {
		failCourse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// ErrNeedsForce refuses to delete a harness that waits for a human or was interrupted, unless
// the request says --force.
var ErrNeedsForce = errors.New("needs --force")

// DeleteResult is what delete and prune removed (or, with a dry run, would remove).
type DeleteResult struct {
	// Harnesses are the top-level harnesses removed, each with its sub-agents.
	Harnesses []Removed `json:"harnesses"`
	// Skipped are harnesses prune left alone, and why.
	Skipped []Skipped `json:"skipped,omitempty"`
	DryRun  bool      `json:"dryRun,omitempty"`
	// BytesBefore and BytesAfter are what the store's files took on disk before and after.
	BytesBefore uint64 `json:"bytesBefore"`
	BytesAfter  uint64 `json:"bytesAfter"`
	Freed       uint64 `json:"freedBytes"`
}

// Removed is one top-level harness that delete or prune removed (or would).
type Removed struct {
	ID        string          `json:"id"`
	Status    statefmt.Status `json:"status"`
	UpdatedAt time.Time       `json:"updatedAt"`
	// SubAgents are its sub-agents (and theirs), removed with it.
	SubAgents []string `json:"subAgents,omitempty"`
	// StoredBytes is what its records took (with its sub-agents'), before compression of the
	// store's tables.
	StoredBytes int `json:"storedBytes"`
	// Worktree is the git worktree of an isolated harness, removed with it (its branch stays).
	Worktree string `json:"worktree,omitempty"`
}

// Skipped is a harness prune matched but did not remove.
type Skipped struct {
	ID  string `json:"id"`
	Why string `json:"why"`
}

// PruneRequest is the body of POST /v1/prune.
type PruneRequest struct {
	// OlderThan is how long ago a harness last changed, at least ("30d", "12h").
	OlderThan string `json:"olderThan"`
	// Statuses are the statuses pruned (default completed and failed).
	Statuses []statefmt.Status `json:"statuses,omitempty"`
	DryRun   bool              `json:"dryRun,omitempty"`
}

// maxAge is the longest age ParseAge takes in days or weeks: a hundred years (a longer one in
// weeks would not fit a time.Duration, and wrapped around to a negative age, which pruned
// everything).
const maxAge = 100 * 365 * 24 * time.Hour

// ParseAge reads an age: a Go duration ("36h", "90m") or a whole number of days or weeks
// ("30d", "2w"), at most a hundred years.
func ParseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for unit, d := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, unit); ok {
			v, err := strconv.Atoi(n)
			if err != nil || v < 0 {
				return 0, badInput("age %q: want a whole number of days or weeks (30d, 2w) or a duration (12h)", s)
			}
			if time.Duration(v) > maxAge/d {
				return 0, badInput("age %q: at most a hundred years (36500d, 5214w)", s)
			}
			return time.Duration(v) * d, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, badInput("age %q: want a whole number of days or weeks (30d, 2w) or a duration (12h)", s)
	}
	return d, nil
}

// subAgents maps each harness of the index to its sub-agents.
func subAgents(list []store.IndexEntry) map[string][]string {
	children := map[string][]string{}
	for _, e := range list {
		if e.ParentHarnessID != "" {
			children[e.ParentHarnessID] = append(children[e.ParentHarnessID], e.ID)
		}
	}
	return children
}

// family is a harness and every sub-agent under it (children from subAgents).
func family(children map[string][]string, root string) []string {
	out := []string{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// removableLocked says why a top-level harness may not be removed now (nil when it may): it
// runs or waits in this process's queue (harness.ErrRunning, ErrQueued); without force, it waits
// for a human or was interrupted (ErrNeedsForce). s.mu held.
func (s *Server) removableLocked(e store.IndexEntry, force bool) error {
	id := e.ID
	if err := s.scheduledLocked(id, ""); err != nil {
		return err
	}
	if slices.Contains(s.m.Running(), id) {
		return fmt.Errorf("harness %s %w here: pause it first (`harness-edge pause %s`)", id, harness.ErrRunning, id)
	}
	if force {
		return nil
	}
	switch e.Status {
	case statefmt.StatusRunning:
		return fmt.Errorf("harness %s was running when its process stopped: resume it, or delete it with --force (%w)", id, ErrNeedsForce)
	case statefmt.StatusPaused:
		loaded := s.m.Loaded(id)
		gates, _ := s.m.PendingGates(id)
		if !loaded {
			s.m.Release(id)
		}
		if len(gates) > 0 {
			return fmt.Errorf("harness %s waits for a human (%s): answer it, or delete it with --force (%w)", id, GateHint(id, gates), ErrNeedsForce)
		}
	}
	return nil
}

// reserveLocked reserves the harnesses out lists, sub-agents included, for their deletion
// (harness.Manager.Reserve): from here until remove is done, nothing loads or changes them.
// s.mu held.
func (s *Server) reserveLocked(out *DeleteResult) (release func(), err error) {
	if out.DryRun {
		return func() {}, nil
	}
	var ids []string
	for _, r := range out.Harnesses {
		ids = append(ids, r.ID)
		ids = append(ids, r.SubAgents...)
	}
	return s.m.Reserve(ids)
}

// remove deletes the families out lists, which reserveLocked reserved, and then lets them go
// (release). Their worktrees go first, while the tasks that name them can still be read, and
// without s.mu: a `git worktree remove` takes tens of milliseconds, and a prune of hundreds of
// isolated harnesses held every other request for seconds. A harness whose worktree cannot be
// removed (a locked one, say) is not deleted: with skip (a prune) it is listed as skipped, with
// the reason, and the others go; without (a delete) nothing is. Their keys then go in one
// batch, under s.mu; giveBack then compacts them, without it.
func (s *Server) remove(out *DeleteResult, release func(), skip bool) (store.DeleteSummary, error) {
	defer release()
	if out.DryRun {
		out.BytesBefore = s.store.DiskUsage()
		out.BytesAfter = out.BytesBefore
		return store.DeleteSummary{}, nil
	}
	var ids []string
	kept := out.Harnesses[:0]
family:
	for _, r := range out.Harnesses {
		// Sub-agents first: with subAgents: worktree each has one of its own.
		for _, id := range append(slices.Clone(r.SubAgents), r.ID) {
			dir, err := s.m.RemoveWorktree(id)
			switch {
			case err != nil && skip:
				out.Skipped = append(out.Skipped, Skipped{ID: r.ID, Why: fmt.Sprintf("harness %s: %v (it was not deleted)", id, err)})
				continue family
			case err != nil:
				return store.DeleteSummary{}, fmt.Errorf("harness %s: %w (the store was not changed)", id, err)
			}
			if id == r.ID {
				r.Worktree = dir
			}
		}
		kept = append(kept, r)
		ids = append(ids, r.ID)
		ids = append(ids, r.SubAgents...)
	}
	out.Harnesses = kept
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, err := s.store.RemoveHarnesses(ids)
	for _, id := range sum.Deleted {
		s.m.Release(id)
		// Their iteration logs and unread messages go too (a new harness may take the id).
		if rerr := errors.Join(itlog.RemoveHarness(s.logDir, id), inbox.RemoveHarness(s.inboxDir, id)); rerr != nil {
			s.log.Warn("deleted harness: its logs or inbox could not be removed", "harness", id, "err", rerr)
		}
	}
	return sum, err
}

// giveBack compacts the keys of what remove deleted, so that the disk is given back now,
// and says how much in out. It runs without s.mu: compacting a large store takes seconds, and
// every other request (ls, show, the console, a run's start) waited for it.
func (s *Server) giveBack(ctx context.Context, out *DeleteResult, sum store.DeleteSummary) error {
	if out.DryRun {
		return nil
	}
	err := s.store.GiveBack(ctx, &sum)
	out.BytesBefore, out.BytesAfter, out.Freed = sum.BytesBefore, sum.BytesAfter, sum.Freed()
	return err
}

// removed describes a top-level harness and its sub-agents for a DeleteResult (children from
// subAgents: made once for a prune of thousands, not once for each).
func (s *Server) removed(children map[string][]string, e store.IndexEntry) Removed {
	fam := family(children, e.ID)
	r := Removed{ID: e.ID, Status: e.Status, UpdatedAt: e.UpdatedAt, SubAgents: fam[1:]}
	for _, id := range fam {
		if n, err := s.store.ChainBytes(id); err == nil {
			r.StoredBytes += n
		}
	}
	return r
}

// Delete removes a harness with its sub-agents, chain, events, index entry and task, then
// compacts their keys so that the disk is given back. It is refused, changing nothing, for a
// sub-agent (delete its parent), a harness that runs or is queued here, and, without force, one
// that waits for a human or was interrupted.
func (s *Server) Delete(ctx context.Context, id string, force bool) (DeleteResult, error) {
	if err := store.ValidID(id); err != nil {
		return DeleteResult{}, err
	}
	out, release, err := s.chooseFamily(id, force)
	if err != nil {
		return out, err
	}
	sum, err := s.remove(&out, release, false)
	if err != nil {
		return out, err
	}
	return out, s.giveBack(ctx, &out, sum)
}

// chooseFamily is the part of Delete under s.mu: the checks, and the family reserved.
func (s *Server) chooseFamily(id string, force bool) (DeleteResult, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.Reserved(id) {
		return DeleteResult{}, nil, store.BeingDeleted(id)
	}
	list, err := s.store.List()
	if err != nil {
		return DeleteResult{}, nil, err
	}
	i := slices.IndexFunc(list, func(e store.IndexEntry) bool { return e.ID == id })
	if i < 0 {
		_, err := s.store.Index(id)
		return DeleteResult{}, nil, cmp.Or(err, fmt.Errorf("harness %s: %w", id, store.ErrNotFound))
	}
	e := list[i]
	if e.ParentHarnessID != "" {
		return DeleteResult{}, nil, fmt.Errorf("harness %s %w of %s: delete %s (its sub-agents go with it)", id, harness.ErrSubAgent, e.ParentHarnessID, e.ParentHarnessID)
	}
	if err := s.removableLocked(e, force); err != nil {
		return DeleteResult{}, nil, err
	}
	out := DeleteResult{Harnesses: []Removed{s.removed(subAgents(list), e)}}
	release, err := s.reserveLocked(&out)
	return out, release, err
}

// Prune deletes the top-level harnesses (with their sub-agents) in the statuses asked for
// (default completed and failed) that last changed longer ago than req.OlderThan, in one batch,
// then compacts. Harnesses that run, are queued, wait for a human or were interrupted are
// skipped and listed. A dry run says what it would delete and deletes nothing.
func (s *Server) Prune(ctx context.Context, req PruneRequest) (DeleteResult, error) {
	age, err := ParseAge(req.OlderThan)
	if err != nil {
		return DeleteResult{}, err
	}
	statuses := req.Statuses
	if len(statuses) == 0 {
		statuses = []statefmt.Status{statefmt.StatusCompleted, statefmt.StatusFailed}
	}
	for _, st := range statuses {
		if !slices.Contains(statefmt.Statuses, st) || st == statefmt.StatusRunning {
			return DeleteResult{}, badInput("status %q cannot be pruned (completed, failed, paused, created)", st)
		}
	}
	out, release, err := s.choosePrune(time.Now().Add(-age), statuses, req.DryRun)
	if err != nil {
		return out, err
	}
	sum, err := s.remove(&out, release, true)
	if err != nil {
		return out, err
	}
	return out, s.giveBack(ctx, &out, sum)
}

// choosePrune is the part of Prune under s.mu: the choice, and the families reserved.
func (s *Server) choosePrune(cutoff time.Time, statuses []statefmt.Status, dryRun bool) (DeleteResult, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list, err := s.store.List()
	if err != nil {
		return DeleteResult{}, nil, err
	}
	out := DeleteResult{Harnesses: []Removed{}, DryRun: dryRun}
	children := subAgents(list)
	for _, e := range list {
		if e.ParentHarnessID != "" || e.Damaged != "" || !slices.Contains(statuses, e.Status) || !e.UpdatedAt.Before(cutoff) {
			continue
		}
		if s.m.Reserved(e.ID) {
			out.Skipped = append(out.Skipped, Skipped{ID: e.ID, Why: fmt.Sprintf("harness %s is being deleted by another request", e.ID)})
			continue
		}
		if err := s.removableLocked(e, false); err != nil {
			out.Skipped = append(out.Skipped, Skipped{ID: e.ID, Why: err.Error()})
			continue
		}
		out.Harnesses = append(out.Harnesses, s.removed(children, e))
	}
	release, err := s.reserveLocked(&out)
	return out, release, err
}

func (c *Client) Delete(ctx context.Context, id string, force bool) (DeleteResult, error) {
	var r DeleteResult
	path := "/v1/harnesses/" + url.PathEscape(id)
	if force {
		path += "?force=1"
	}
	err := c.do(ctx, http.MethodDelete, path, nil, &r)
	return r, err
}

func (c *Client) Prune(ctx context.Context, req PruneRequest) (DeleteResult, error) {
	var r DeleteResult
	err := c.do(ctx, http.MethodPost, "/v1/prune", req, &r)
	return r, err
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidID(id); err != nil {
		fail(w, err)
		return
	}
	force, err := queryFlag(r.URL.Query(), "force")
	if err != nil {
		fail(w, err)
		return
	}
	res, err := h.api.Delete(r.Context(), id, force)
	if err != nil {
		failCourse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) prune(w http.ResponseWriter, r *http.Request) {
	var req PruneRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	if strings.TrimSpace(req.OlderThan) == "" {
		fail(w, badInput("\"olderThan\" (e.g. \"30d\") is required"))
		return
	}
	res, err := h.api.Prune(r.Context(), req)
	if err != nil {
		failCourse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// ReplanRequest is the body of POST /v1/harnesses/{id}/replan: the plan change's text (YAML or
// JSON), its file name for errors, who and why.
type ReplanRequest struct {
	Change string `json:"change"`
	Name   string `json:"name,omitempty"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ReplanUnchanged is the refusal of a plan change that is not even read, being over the size
// limit: `replan` gives it for the file, the API for the change it is sent.
func ReplanUnchanged(id string, err error) error {
	return fmt.Errorf("harness %s is unchanged: %w", id, err)
}

// Replan applies a plan change to a harness that does not run (harness.Manager.Replan).
func (s *Server) Replan(_ context.Context, id string, req ReplanRequest) (harness.ReplanResult, error) {
	if err := store.ValidID(id); err != nil {
		return harness.ReplanResult{}, err
	}
	if err := checkWords(req.By, req.Reason); err != nil {
		return harness.ReplanResult{}, err
	}
	defer s.forget(id)()
	s.mu.Lock()
	busy := s.scheduledLocked(id, "replan")
	s.mu.Unlock()
	if busy != nil {
		return harness.ReplanResult{}, busy
	}
	r, err := s.m.Replan(id, cmp.Or(req.Name, "the plan change"), []byte(req.Change), req.By, req.Reason)
	var te *task.Error
	if errors.Is(err, task.ErrTooLarge) && errors.As(err, &te) {
		// Worded as `replan` words it, refusing the file before it is sent.
		return r, ReplanUnchanged(id, te)
	}
	if errors.Is(err, harness.ErrBadChange) && !errors.Is(err, task.ErrTooLarge) {
		err = badInput("%w", err)
	}
	return r, err
}

func (c *Client) Replan(ctx context.Context, id string, req ReplanRequest) (harness.ReplanResult, error) {
	if err := checkWords(req.By, req.Reason); err != nil { // JSON would carry a byte that is not UTF-8 as U+FFFD
		return harness.ReplanResult{}, err
	}
	var r harness.ReplanResult
	err := c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/replan", req, &r)
	return r, err
}

func (h *handler) replan(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidID(id); err != nil {
		fail(w, err)
		return
	}
	var req ReplanRequest
	err := decode(r, &req)
	if err != nil {
		if err = carriesTooLarge(err, "the plan change", "plan change"); errors.Is(err, task.ErrTooLarge) {
			err = ReplanUnchanged(id, err)
		}
		fail(w, err)
		return
	}
	if strings.TrimSpace(req.Change) == "" {
		fail(w, badInput("\"change\" (the plan change's text) is required"))
		return
	}
	res, err := h.api.Replan(r.Context(), id, req)
	if err != nil {
		failCourse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// CheckpointRequest is the body of POST /v1/harnesses/{id}/checkpoints.
type CheckpointRequest struct {
	Name string `json:"name"`
	By   string `json:"by,omitempty"`
}

// Checkpoints lists the points a harness can be rolled back to: its named checkpoints, and the
// checkpoints of its chain the store still holds (from the last keyframes on).
type Checkpoints struct {
	HarnessID string             `json:"harnessId"`
	Named     []store.NamedPoint `json:"named"`
	// Recent are the chain's checkpoints from FirstSeq to HeadSeq: `rollback --to SEQ` reaches
	// any of them.
	FirstSeq uint64 `json:"firstSeq"`
	HeadSeq  uint64 `json:"headSeq"`
}

// RollbackRequest is the body of POST /v1/harnesses/{id}/rollback: To is a checkpoint's name or
// a sequence number of the chain.
type RollbackRequest struct {
	To     string `json:"to"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ErrQueued refuses a change of course on a harness that waits in the daemon's queue to run
// (for a slot, or for its workspace): pause it first, which takes it out of the queue.
var ErrQueued = errors.New("is queued")

// scheduledLocked refuses a harness that runs or waits in this process's queue, saying which.
// then is what to do after pausing it; empty, the sentence ends at the pause. s.mu held.
func (s *Server) scheduledLocked(id, then string) error {
	why := harness.ErrRunning
	switch {
	case s.running[id]:
	case slices.Contains(s.queue, id):
		why = ErrQueued
	default:
		return nil
	}
	if then != "" {
		then = ", then " + then
	}
	if e, err := s.store.Index(id); why == ErrQueued && err == nil && e.Status == statefmt.StatusCreated {
		// Pause refuses a harness that has not started; stop takes it off the queue.
		return fmt.Errorf("harness %s %w in the daemon and has not started: stop it first (`harness-edge stop %s`)%s", id, why, id, then)
	}
	return fmt.Errorf("harness %s %w in the daemon: pause it first (`harness-edge pause %s`)%s", id, why, id, then)
}

// Checkpoint keeps the harness's newest checkpoint under a name (store.SaveNamed), with a
// course event, for a harness that does not run.
func (s *Server) Checkpoint(_ context.Context, id string, req CheckpointRequest) (store.NamedPoint, error) {
	if err := store.ValidID(id); err != nil {
		return store.NamedPoint{}, err
	}
	if err := checkWords(req.By, ""); err != nil {
		return store.NamedPoint{}, err
	}
	if err := store.ValidName(req.Name); err != nil {
		return store.NamedPoint{}, badInput("%w", err)
	}
	defer s.forget(id)()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.scheduledLocked(id, "name its checkpoint"); err != nil {
		return store.NamedPoint{}, err
	}
	st, err := s.m.CheckpointState(id)
	if err != nil {
		return store.NamedPoint{}, err
	}
	idx, err := s.store.Index(id)
	if err != nil {
		return store.NamedPoint{}, err
	}
	now := time.Now().UTC()
	ev := event.Event{Type: event.Course, HarnessID: id, Time: now, Action: harness.CourseCheckpoint, By: req.By,
		Message: fmt.Sprintf("named %s (checkpoint %d)", req.Name, idx.HeadSeq)}
	return s.store.SaveNamed(id, req.Name, idx.HeadSeq, now, st, []event.Event{ev})
}

// ListCheckpoints lists a harness's named checkpoints and the range of its chain's.
func (s *Server) ListCheckpoints(_ context.Context, id string) (Checkpoints, error) {
	if err := store.ValidID(id); err != nil {
		return Checkpoints{}, err
	}
	idx, err := s.store.Index(id)
	if err != nil {
		return Checkpoints{}, err
	}
	named, err := s.store.Named(id)
	if err != nil {
		return Checkpoints{}, err
	}
	first, err := s.store.FirstSeq(id)
	if err != nil {
		return Checkpoints{}, err
	}
	return Checkpoints{HarnessID: id, Named: named, FirstSeq: first, HeadSeq: idx.HeadSeq}, nil
}

// Rollback makes a named checkpoint's state, or that of a checkpoint of the chain, the harness's
// newest checkpoint (harness.Manager.Rollback).
func (s *Server) Rollback(_ context.Context, id string, req RollbackRequest) (harness.RollbackResult, error) {
	if err := store.ValidID(id); err != nil {
		return harness.RollbackResult{}, err
	}
	if err := checkWords(req.By, req.Reason); err != nil {
		return harness.RollbackResult{}, err
	}
	if strings.TrimSpace(req.To) == "" {
		return harness.RollbackResult{}, badInput("say what to roll back to: a checkpoint's name or sequence number")
	}
	defer s.forget(id)()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.scheduledLocked(id, "roll it back"); err != nil {
		return harness.RollbackResult{}, err
	}
	var st *statefmt.HarnessState
	var taskJSON []byte
	point := req.To
	if seq, err := strconv.ParseUint(req.To, 10, 64); err == nil {
		idx, err := s.store.Index(id)
		if err != nil {
			return harness.RollbackResult{}, err
		}
		first, err := s.store.FirstSeq(id)
		if err != nil {
			return harness.RollbackResult{}, err
		}
		if seq < first || seq > idx.HeadSeq {
			return harness.RollbackResult{}, badInput("harness %s holds checkpoints %d to %d (older ones were released at a keyframe; name a checkpoint to keep it)", id, first, idx.HeadSeq)
		}
		if st, err = s.store.RestoreAt(id, seq); err != nil {
			return harness.RollbackResult{}, err
		}
		point = strconv.FormatUint(seq, 10)
	} else {
		_, named, tj, err := s.store.RestoreNamed(id, req.To)
		if errors.Is(err, store.ErrInvalidName) {
			err = badInput("%w", err)
		}
		if err != nil {
			return harness.RollbackResult{}, err
		}
		st, taskJSON = named, tj
		if len(taskJSON) == 0 {
			taskJSON = nil
		}
	}
	return s.m.Rollback(id, st, taskJSON, point, req.By, req.Reason)
}

func (c *Client) Checkpoint(ctx context.Context, id string, req CheckpointRequest) (store.NamedPoint, error) {
	if err := checkWords(req.By, ""); err != nil { // JSON would carry a byte that is not UTF-8 as U+FFFD
		return store.NamedPoint{}, err
	}
	var p store.NamedPoint
	err := c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/checkpoints", req, &p)
	return p, err
}

func (c *Client) ListCheckpoints(ctx context.Context, id string) (Checkpoints, error) {
	var l Checkpoints
	err := c.do(ctx, http.MethodGet, "/v1/harnesses/"+url.PathEscape(id)+"/checkpoints", nil, &l)
	return l, err
}

func (c *Client) Rollback(ctx context.Context, id string, req RollbackRequest) (harness.RollbackResult, error) {
	if err := checkWords(req.By, req.Reason); err != nil { // JSON would carry a byte that is not UTF-8 as U+FFFD
		return harness.RollbackResult{}, err
	}
	var r harness.RollbackResult
	err := c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/rollback", req, &r)
	return r, err
}

func (h *handler) checkpoint(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidID(id); err != nil {
		fail(w, err)
		return
	}
	var req CheckpointRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	p, err := h.api.Checkpoint(r.Context(), id, req)
	if err != nil {
		failCourse(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

func (h *handler) checkpoints(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidID(id); err != nil {
		fail(w, err)
		return
	}
	l, err := h.api.ListCheckpoints(r.Context(), id)
	if err != nil {
		failCourse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (h *handler) rollback(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidID(id); err != nil {
		fail(w, err)
		return
	}
	var req RollbackRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	res, err := h.api.Rollback(r.Context(), id, req)
	if err != nil {
		failCourse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// prunedAttrs are the attributes of retention's log line for a prune: the ids of the harnesses
// it deleted (the first idlist.Max of them and how many more: a retention that deletes
// thousands logs a line, not thousands of ids), how many, the bytes freed and the retention.
func prunedAttrs(res DeleteResult, retain time.Duration) []any {
	ids := make([]string, len(res.Harnesses))
	for i, h := range res.Harnesses {
		ids[i] = h.ID
	}
	return []any{"harnesses", idlist.Join(ids, ","), "count", len(ids), "freedBytes", res.Freed, "olderThan", retain.String()}
}

// RetentionEvery is how often the daemon's retention prunes: a quarter of the retention, at
// least a second and at most an hour.
func RetentionEvery(retain time.Duration) time.Duration {
	return min(time.Hour, max(retain/4, time.Second))
}

// Retention prunes the completed and failed harnesses that last changed longer than retain
// ago (as `prune --older-than` does) now and every RetentionEvery, until ctx ends, logging what
// it deleted. It returns what to call to wait for it to stop (before the store closes). A zero
// retain does nothing.
func (s *Server) Retention(ctx context.Context, retain time.Duration) (wait func()) {
	if retain <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(RetentionEvery(retain))
		defer t.Stop()
		for {
			res, err := s.Prune(ctx, PruneRequest{OlderThan: retain.String()})
			switch {
			case err != nil:
				s.log.Error("retention: prune", "err", err)
			case len(res.Harnesses) > 0:
				s.log.Info("retention: pruned", prunedAttrs(res, retain)...)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { <-done }
}
