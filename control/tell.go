package control

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/harness-edge/harness-edge/runtime/inbox"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/store"
)

// Told is the answer to tell: the message as stored.
type Told struct {
	HarnessID string        `json:"harnessId"`
	Message   inbox.Message `json:"message"`
}

// Tell stores a message from a human for the next iteration of harness id's command agent
// (package inbox: durable before it returns). It refuses, storing nothing, an invalid message,
// a harness that has ended, one without a command agent, and a full inbox.
func (s *Server) Tell(_ context.Context, id, text string) (Told, error) {
	if err := store.ValidID(id); err != nil {
		return Told{}, err
	}
	if err := inbox.Check(text); err != nil {
		return Told{}, badInput("%v", err)
	}
	idx, err := s.store.Index(id)
	if err != nil {
		return Told{}, err
	}
	if finished(idx.Status) {
		return Told{}, badInput("harness %s has %s: no iteration will read the message", id, idx.Status)
	}
	raw, err := s.store.Task(id)
	if err != nil {
		return Told{}, err
	}
	t, err := task.Parse("harness "+id+"'s task", raw)
	if err != nil {
		return Told{}, err
	}
	command := false
	for _, a := range t.Agents {
		command = command || a.Driver == "command"
	}
	if !command {
		return Told{}, badInput("harness %s has no command agent: only a command agent's iterations read messages", id)
	}
	m, err := inbox.Tell(s.inboxDir, id, text, time.Now())
	if errors.Is(err, inbox.ErrFull) {
		return Told{}, badInput("%w", err)
	}
	if err != nil {
		return Told{}, err
	}
	return Told{HarnessID: id, Message: m}, nil
}

// TellRequest is the body of POST /v1/harnesses/{id}/tell.
type TellRequest struct {
	Message string `json:"message"`
}

func (h *handler) tell(w http.ResponseWriter, r *http.Request) {
	var req TellRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	told, err := h.api.Tell(r.Context(), r.PathValue("id"), req.Message)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, told)
}

func (c *Client) Tell(ctx context.Context, id, text string) (Told, error) {
	var t Told
	err := c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/tell", TellRequest{Message: text}, &t)
	return t, err
}
