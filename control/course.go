package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/harness-edge/harness-edge/runtime/harness"
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

// Retry takes a failed harness (or one failed step) back to runnable (harness.Manager.Retry).
func (s *Server) Retry(_ context.Context, id string, req RetryRequest) (harness.RetryResult, error) {
	if err := store.ValidID(id); err != nil {
		return harness.RetryResult{}, err
	}
	defer s.forget(id)()
	s.mu.Lock()
	scheduled := s.running[id]
	s.mu.Unlock()
	if scheduled {
		return harness.RetryResult{}, fmt.Errorf("harness %s %w in the daemon: pause it first (`harness-edge pause %s`), then retry", id, harness.ErrRunning, id)
	}
	return s.m.Retry(id, req.Step, req.By, req.Reason)
}

func (c *Client) Retry(ctx context.Context, id string, req RetryRequest) (harness.RetryResult, error) {
	var r harness.RetryResult
	err := c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/retry", req, &r)
	return r, err
}

// courseRoutes adds the course and removal endpoints to the API's mux.
func courseRoutes(mux *http.ServeMux, h *handler) {
	mux.HandleFunc("POST /v1/harnesses/{id}/retry", h.retry)
}

// failCourse maps a course operation's error to its status code: a request the harness's
// state refuses is a conflict.
func failCourse(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, harness.ErrRunning), errors.Is(err, harness.ErrNothingToRetry), errors.Is(err, harness.ErrSubAgent):
		writeError(w, http.StatusConflict, err)
		return
	case errors.Is(err, harness.ErrUnknownStep):
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
