package control

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/harness-edge/harness-edge/store/trust"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/itlog"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// SocketName is the control socket's file name in the store directory; TokenName the HTTP
// API's bearer token's.
const (
	SocketName = "control.sock"
	TokenName  = "http.token"
)

// MaxBody is the largest request body the API reads (25 MiB). A submitted task file may be
// task.MaxFileSize, and JSON writes each of its bytes in at most six (a control character,
// an invalid UTF-8 byte, or <, > and & as \u003c); the last MiB is room for the rest of the
// body: the task's name and directory, and the other fields.
const MaxBody = 6*task.MaxFileSize + 1<<20

// maxSocketPath is the longest path a Unix socket may have on Linux (sun_path is 108 bytes).
const maxSocketPath = 107

// SocketPath is the control socket of the store in dir.
func SocketPath(dir string) string { return filepath.Join(dir, SocketName) }

// Handler serves API over HTTP. With a token every request must carry
// "Authorization: Bearer TOKEN", but GET /v1/health, which without it answers only
// PublicHealth (the Unix socket needs none: the socket is 0600 in a directory of the owner's).
func Handler(api API, token string) http.Handler {
	mux := http.NewServeMux()
	h := &handler{api: api}
	mux.HandleFunc("GET /v1/health", h.health)
	mux.HandleFunc("GET /v1/harnesses", h.list)
	mux.HandleFunc("POST /v1/harnesses", h.submit)
	mux.HandleFunc("GET /v1/harnesses/{id}", h.show)
	mux.HandleFunc("POST /v1/harnesses/{id}/{action}", h.action)
	mux.HandleFunc("GET /v1/harnesses/{id}/events", h.events)
	mux.HandleFunc("GET /v1/harnesses/{id}/logs", h.logs)
	mux.HandleFunc("POST /v1/harnesses/{id}/tell", h.tell)
	mux.HandleFunc("POST /v1/freeze", h.freeze)
	mux.HandleFunc("POST /v1/unfreeze", h.unfreeze)
	mux.HandleFunc("GET /v1/report", h.report)
	mux.HandleFunc("GET /v1/verify", h.verify)
	courseRoutes(mux, h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A path under a harness that no harness can have is a bad id before it is a bad path,
		// an empty one (`delete ""`) included: the message is the one the store gives.
		if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/harnesses/"); ok {
			id, _, _ := strings.Cut(rest, "/")
			if err := store.ValidID(id); err != nil {
				fail(w, err)
				return
			}
		}
		writeError(w, http.StatusNotFound, fmt.Errorf("no endpoint %s %s (see docs/daemon.md)", r.Method, r.URL.Path))
	})
	var root http.Handler = mux
	if token != "" {
		want := []byte(token)
		root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
				if r.Method == http.MethodGet && r.URL.Path == "/v1/health" {
					// Without the token health says only that the daemon is up: its pid and
					// the harnesses it runs are for those who hold the token.
					h.publicHealth(w, r)
					return
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="harness-edge"`)
				writeError(w, http.StatusUnauthorized, errors.New("missing or wrong bearer token (it is in "+TokenName+" in the store directory)"))
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		root.ServeHTTP(w, r)
	})
}

type handler struct{ api API }

// errorBody is every error response. Code names the errors a client must tell apart beyond
// the status: CodeWaiting.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// CodeWaiting is the error code of a resume refused because the harness waits for a human
// (ErrWaiting, status 409).
const CodeWaiting = "waiting_for_human"

// writeJSON writes v as the response's JSON. Text goes as it is ("s1 -> s2", not "s1 -\u003e
// s2"): the response is JSON, which browsers are told not to sniff as HTML.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	b := errorBody{Error: err.Error()}
	if errors.Is(err, ErrWaiting) {
		b.Code = CodeWaiting
	}
	writeJSON(w, code, b)
}

// fail maps an operation's error to its status code.
func fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var te *harness.TransitionError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), errors.Is(err, task.ErrTooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBadInput), errors.Is(err, store.ErrInvalidID):
		code = http.StatusBadRequest
	case errors.Is(err, store.ErrNotFound), errors.Is(err, itlog.ErrNoLogs):
		code = http.StatusNotFound
	case errors.Is(err, ErrNotDaemon):
		code = http.StatusNotImplemented
	case errors.As(err, &te), errors.Is(err, harness.ErrNoGate), errors.Is(err, harness.ErrExists), errors.Is(err, harness.ErrNotStarted), errors.Is(err, ErrWaiting),
		errors.Is(err, harness.ErrSubAgent):
		code = http.StatusConflict
	}
	writeError(w, code, err)
}

// decode reads a JSON body into v strictly: one object, known fields only. An empty body is
// an empty object.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("the request body is larger than the API takes (%d bytes, %d MiB): %w", mbe.Limit, mbe.Limit>>20, err)
		}
		return badInput("reading the body: %v", err)
	}
	if i := task.InvalidUTF8(b); i >= 0 {
		// encoding/json would read each such byte as U+FFFD: a Latin-1 task file put in a JSON
		// string as it is would be taken with its text changed.
		return badInput("the request body is not UTF-8: the byte 0x%02X at byte offset %d is not valid UTF-8, and JSON text must be; "+
			"send text in another encoding (a task file, a plan change) as UTF-8, as the command line does, or convert it first (iconv -f LATIN1 -t UTF-8)", b[i], i)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badInput("the body is not the JSON this endpoint takes: %v", err)
	}
	if dec.More() {
		return badInput("the body holds more than one JSON value")
	}
	if i := task.LoneSurrogate(b); i >= 0 {
		// Half a surrogate pair is no character: encoding/json read it as U+FFFD.
		return badInput("the request body is not UTF-8: the escape %s at byte offset %d is half of a UTF-16 surrogate pair, which no UTF-8 text holds", b[i:i+6], i)
	}
	return nil
}

func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	hl, err := h.api.Health(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, hl)
}

// PublicHealth is GET /v1/health over HTTP without the token: the daemon is up, and its version.
type PublicHealth struct {
	OK      bool   `json:"ok"`
	Version string `json:"version"`
}

func (h *handler) publicHealth(w http.ResponseWriter, r *http.Request) {
	hl, err := h.api.Health(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, PublicHealth{OK: hl.OK, Version: hl.Version})
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	l, err := h.api.List(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (h *handler) show(w http.ResponseWriter, r *http.Request) {
	b, err := h.api.StateJSON(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// SubmitRequest is POST /v1/harnesses: the task file as text.
type SubmitRequest struct {
	Task string `json:"task"`
	Name string `json:"name,omitempty"`
	Dir  string `json:"dir,omitempty"`
}

// carriesTooLarge says, of a body over MaxBody, what it carried: MaxBody holds a task file or a
// plan change (what) at task.MaxFileSize however JSON escapes it, so a larger body carries a
// larger one, refused with the message `run`, `submit` and `replan` give (name: what it is
// called when the body's name cannot be read). Other errors are returned as they are.
func carriesTooLarge(err error, name, what string) error {
	var mbe *http.MaxBytesError
	if !errors.As(err, &mbe) {
		return err
	}
	return fmt.Errorf("%w: %w", task.SizeError(name, what, -1), err)
}

func (h *handler) submit(w http.ResponseWriter, r *http.Request) {
	var req SubmitRequest
	err := decode(r, &req)
	if err != nil {
		fail(w, carriesTooLarge(err, "the submitted task", "task file"))
		return
	}
	if strings.TrimSpace(req.Task) == "" {
		fail(w, badInput("\"task\" (the task file's text) is required"))
		return
	}
	id, err := h.api.Submit(r.Context(), Submission{Task: []byte(req.Task), Name: req.Name, Dir: req.Dir})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": id})
}

// ActionRequest is the body of POST /v1/harnesses/{id}/{approve|reject} (optional elsewhere).
type ActionRequest struct {
	Gate   string `json:"gate,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (h *handler) action(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	if err := store.ValidID(id); err != nil {
		fail(w, err)
		return
	}
	var req ActionRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	ctx := r.Context()
	switch action {
	case "approve", "reject":
		if action == "reject" && strings.TrimSpace(req.Reason) == "" {
			fail(w, badInput("a rejection needs a \"reason\""))
			return
		}
		d, err := h.api.Decide(ctx, id, req.Gate, action == "approve", req.Reason)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	case "pause", "resume", "stop":
		if req.Gate != "" || req.Reason != "" {
			fail(w, badInput("%s takes no gate or reason", action))
			return
		}
		var status statefmt.Status
		var err error
		switch action {
		case "pause":
			// Pause returns once the harness has come to rest (bounded): its status is the new one.
			err = h.api.Pause(ctx, id)
		case "resume":
			// Resume queues the harness: it runs when the scheduler has room (and is not frozen).
			if err = h.api.Resume(ctx, id); err == nil {
				writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "action": action, "queued": true,
					"watch": "/v1/harnesses/" + url.PathEscape(id) + "/events?follow=1"})
				return
			}
		case "stop":
			status, err = h.api.Stop(ctx, id)
		}
		if err != nil {
			fail(w, err)
			return
		}
		if status == "" {
			st, err := h.api.State(ctx, id)
			if err == nil {
				status = st.Status
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "action": action, "status": status})
	default:
		writeError(w, http.StatusNotFound, fmt.Errorf("no action %q: approve, reject, pause, resume or stop", action))
	}
}

// queryFlag reads a yes-or-no query parameter: 1 or true, 0 or false, or absent (no). Anything
// else is refused: a client that wrote follow=yes would otherwise get a list where it meant a
// stream, and never know why.
func queryFlag(q url.Values, name string) (bool, error) {
	switch v := q.Get(name); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, badInput("%s=%q: want 1 or 0", name, v)
	}
}

func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	var after uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fail(w, badInput("after=%q is not an event number", v))
			return
		}
		after = n
	}
	follow, err := queryFlag(q, "follow")
	if err != nil {
		fail(w, err)
		return
	}
	if !follow {
		evs := []event.Event{}
		if err := h.api.Events(r.Context(), id, after, false, func(e event.Event) error { evs = append(evs, e); return nil }); err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, evs)
		return
	}
	// Server-sent events: one "id/event/data" block per event, flushed; an "end" event when the
	// harness has finished. A stream lasts as long as the harness runs: the server's write
	// timeout is lifted for it, and each event's write is bounded instead (the read timeout
	// ended with the request, which has no body).
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	bound := func() { _ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)) }
	started := false
	start := func() {
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
	}
	err = h.api.Events(r.Context(), id, after, true, func(e event.Event) error {
		bound()
		start()
		b, _ := json.Marshal(e)
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.N, e.Type, b); err != nil {
			return err
		}
		return rc.Flush()
	})
	bound()
	if err != nil && !started {
		fail(w, err)
		return
	}
	if r.Context().Err() == nil {
		start()
		fmt.Fprint(w, "event: end\ndata: {}\n\n")
	}
}

// FreezeRequest is the body of POST /v1/freeze.
type FreezeRequest struct {
	Running FreezeMode `json:"running,omitempty"`
}

func (h *handler) freeze(w http.ResponseWriter, r *http.Request) {
	var req FreezeRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	if err := h.api.Freeze(r.Context(), req.Running); err != nil {
		fail(w, err)
		return
	}
	hl, _ := h.api.Health(r.Context())
	writeJSON(w, http.StatusOK, hl)
}

func (h *handler) unfreeze(w http.ResponseWriter, r *http.Request) {
	if err := decode(r, &struct{}{}); err != nil {
		fail(w, err)
		return
	}
	if err := h.api.Unfreeze(r.Context()); err != nil {
		fail(w, err)
		return
	}
	hl, _ := h.api.Health(r.Context())
	writeJSON(w, http.StatusOK, hl)
}

func (h *handler) report(w http.ResponseWriter, r *http.Request) {
	var since time.Duration
	if v := r.URL.Query().Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fail(w, badInput("since=%q is not a duration like 12h", v))
			return
		}
		since = d
	}
	beforeWrite := workDeadlines(w)
	rep, err := h.api.Report(r.Context(), since)
	beforeWrite()
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (h *handler) verify(w http.ResponseWriter, r *http.Request) {
	beforeWrite := workDeadlines(w)
	p, err := h.api.Verify(r.Context(), r.URL.Query().Get("id"))
	beforeWrite()
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// ListenSocket listens on the store's control socket, replacing a stale one: the caller owns
// the store (holds its lock), so a socket file already there was left by a crashed owner.
func ListenSocket(dir string) (net.Listener, error) {
	path := SocketPath(dir)
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("control socket %s: the path is %d bytes, above the %d a Unix socket allows: use a shorter store directory", path, len(path), maxSocketPath)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("control socket: removing the stale %s: %w", path, err)
	}
	// The socket is made 0600 from the start (not chmodded after): a store directory of ours may
	// be readable by others, who must not connect in between.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	return l, nil
}

// Token returns the HTTP API's bearer token, creating it on first use. It is read only from
// a trusted store directory (trust.CheckDir), without following a symbolic link, and only when
// the file is this user's, with one link and no permission for others (trust.CheckOwnFile):
// a token another user could have planted or can read is refused, on every start. A new token
// is created exclusively (O_EXCL|O_NOFOLLOW, mode 0600).
func Token(dir string) (string, error) {
	if err := trust.CheckDir(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, TokenName)
	const what = "the HTTP API's token file"
	if f, err := trust.OpenOwnFile(path, what, os.O_RDONLY, 0, true); err == nil {
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		if err != nil {
			return "", err
		}
		if t := strings.TrimSpace(string(b)); len(t) >= 32 {
			return t, nil
		}
		return "", fmt.Errorf("%s holds no usable token (delete it and a new one is made)", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", fmt.Errorf("creating %s: %w", path, err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return tok, f.Close()
}

// CheckBind refuses an HTTP address beyond loopback unless allowRemote.
func CheckBind(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: %w (write it like 127.0.0.1:8484)", addr, err)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--http %s binds beyond loopback: anyone who can reach it and has the token controls the store; pass --allow-remote to mean it", addr)
	}
	return nil
}

// Serve serves h on l within lim until ctx ends, then shuts the server down (open streams are
// cut).
func Serve(ctx context.Context, l net.Listener, h http.Handler, lim Limits) error {
	l = limitListen(l, lim.MaxConns)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: lim.ReadHeaderTimeout, ReadTimeout: lim.ReadTimeout,
		WriteTimeout: lim.WriteTimeout, IdleTimeout: lim.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}
