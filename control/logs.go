package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/harness-edge/harness-edge/runtime/itlog"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// Logs writes a harness's iteration log to w (itlog.Print): the newest iteration's, or
// q.Iteration's; with q.Follow, what is written next too, while the harness runs or waits in
// the daemon's queue. The logs are files in the store directory, so the owner and a command
// that opened the store read the same.
func (s *Server) Logs(ctx context.Context, id string, q itlog.Query, w io.Writer) error {
	if err := store.ValidID(id); err != nil {
		return err
	}
	if _, err := s.store.Index(id); err != nil {
		return err
	}
	if q.Iteration < 0 {
		return badInput("iteration %d: iterations count from 1", q.Iteration)
	}
	running := func() bool {
		if s.cfg.Owner == OwnerNone { // nothing runs here, and no one else writes this store
			return false
		}
		idx, err := s.store.Index(id)
		return err == nil && (idx.Status == statefmt.StatusRunning || idx.Status == statefmt.StatusCreated)
	}
	return itlog.Print(ctx, s.logDir, id, q, running, w)
}

// logs serves GET /v1/harnesses/{id}/logs[?iteration=N][&follow=1] as text/plain, streamed.
func (h *handler) logs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var lq itlog.Query
	if v := q.Get("iteration"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail(w, badInput("iteration=%q is not an iteration number (1, 2, ...)", v))
			return
		}
		lq.Iteration = n
	}
	follow, err := queryFlag(q, "follow")
	if err != nil {
		fail(w, err)
		return
	}
	lq.Follow = follow
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a followed log lasts as long as the harness runs
	sw := &streamWriter{w: w, rc: rc}
	err = h.api.Logs(r.Context(), r.PathValue("id"), lq, sw)
	if err != nil && !sw.started {
		fail(w, err)
		return
	}
	if !sw.started {
		sw.start()
	}
	if err == nil {
		// The log was printed to its end: a stream cut short (an owner that stopped) lacks this.
		w.Header().Set(logEndTrailer, "complete")
	}
}

// logEndTrailer is the HTTP trailer that marks a log printed to its end.
const logEndTrailer = "X-Log-End"

// streamWriter starts a text/plain answer at its first write and flushes every write, each
// bounded in time.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (s *streamWriter) start() {
	s.w.Header().Set("Trailer", logEndTrailer)
	s.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	s.w.Header().Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.started = true
}

func (s *streamWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.start()
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
	n, err := s.w.Write(p)
	if err == nil {
		err = s.rc.Flush()
	}
	return n, err
}

func (c *Client) Logs(ctx context.Context, id string, q itlog.Query, w io.Writer) error {
	path := "/v1/harnesses/" + url.PathEscape(id) + "/logs"
	v := url.Values{}
	if q.Iteration != 0 {
		v.Set("iteration", strconv.Itoa(q.Iteration))
	}
	if q.Follow {
		v.Set("follow", "1")
	}
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return err
	case err != nil || resp.Trailer.Get(logEndTrailer) == "":
		return fmt.Errorf("%w while printing harness %s's log", ErrOwnerGone, id)
	}
	return nil
}
