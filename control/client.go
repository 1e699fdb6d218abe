package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/statefmt"
)

// ErrNoOwner is returned by Dial when no process serves the store's control socket.
var ErrNoOwner = errors.New("no process owns the store")

// ErrOwnerGone is returned when the owner stopped answering in the middle of a request (it
// ended, or crashed): the store may now be opened directly.
var ErrOwnerGone = errors.New("the process that owned the store went away")

// ErrNotSent marks an ErrOwnerGone where the request never reached the owner (its socket was
// gone or refused the connection): the operation can safely be done another way.
var ErrNotSent = errors.New("the request was not sent")

// Client reaches a store's owner through its control socket (or an HTTP API with a token).
type Client struct {
	http  *http.Client
	base  string
	token string
	// Owner is what the owner said about itself when the client connected.
	Owner Health
}

// dialWait is how long Dial waits for the owner's answer to its health check.
var dialWait = 5 * time.Second

// Dial connects to the owner of the store in dir. It returns ErrNoOwner when there is no
// socket, or only a stale one (its owner crashed; the next owner replaces it).
func Dial(dir string) (*Client, error) {
	path := SocketPath(dir)
	if _, err := os.Stat(path); err != nil {
		return nil, ErrNoOwner
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	c := &Client{http: &http.Client{Transport: tr}, base: "http://harness-edge"}
	ctx, cancel := context.WithTimeout(context.Background(), dialWait)
	defer cancel()
	h, err := c.Health(ctx)
	if err != nil {
		if errors.Is(err, ErrOwnerGone) {
			return nil, ErrNoOwner
		}
		return nil, err
	}
	c.Owner = h
	return c, nil
}

// NewHTTPClient is a client of an HTTP API at base ("http://127.0.0.1:8484") with a token.
func NewHTTPClient(base, token string) *Client {
	return &Client{http: &http.Client{}, base: strings.TrimRight(base, "/"), token: token}
}

// APIError is an error the owner answered with.
type APIError struct {
	Status  int
	Message string
	// Code is the error's code when the owner gave one (CodeWaiting).
	Code string
}

func (e *APIError) Error() string { return e.Message }

// Is lets callers test an APIError against the errors the server maps to its status.
func (e *APIError) Is(target error) bool {
	switch e.Status {
	case http.StatusNotFound:
		return target == store.ErrNotFound
	case http.StatusBadRequest:
		return target == ErrBadInput
	case http.StatusRequestEntityTooLarge:
		return target == task.ErrTooLarge
	case http.StatusNotImplemented:
		return target == ErrNotDaemon
	case http.StatusConflict:
		return target == ErrWaiting && e.Code == CodeWaiting
	}
	return false
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: %v", ErrOwnerGone, err)
	}
	return nil
}

// send makes a request and returns a 2xx response; other statuses become *APIError. A request
// about a harness whose id no harness can have is not sent: the server's router would clean an
// empty id or "..", and the answer would be "no endpoint", where the same command without a
// daemon says what is wrong with the id.
func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	if rest, ok := strings.CutPrefix(path, "/v1/harnesses/"); ok {
		seg, _, _ := strings.Cut(rest, "/")
		seg, _, _ = strings.Cut(seg, "?")
		id, err := url.PathUnescape(seg)
		if err != nil {
			id = seg // a stray '%': no id has one
		}
		if err := store.ValidID(id); err != nil {
			return nil, err
		}
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("%w (%w): %v", ErrOwnerGone, ErrNotSent, err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			// EPIPE: the owner died while the request was being written (its socket's file is
			// left behind by a kill).
			return nil, fmt.Errorf("%w: %v", ErrOwnerGone, err)
		}
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		var eb errorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = fmt.Sprintf("%s %s: %s", method, path, resp.Status)
		}
		return nil, &APIError{Status: resp.StatusCode, Message: eb.Error, Code: eb.Code}
	}
	return resp, nil
}

func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.do(ctx, http.MethodGet, "/v1/health", nil, &h)
	return h, err
}

func (c *Client) List(ctx context.Context) ([]store.IndexEntry, error) {
	var l []store.IndexEntry
	err := c.do(ctx, http.MethodGet, "/v1/harnesses", nil, &l)
	return l, err
}

func (c *Client) State(ctx context.Context, id string) (*statefmt.HarnessState, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/harnesses/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOwnerGone, err)
	}
	return statefmt.DecodeJSON(b)
}

// StateJSON returns the owner's JSON as it came when it is a whole document of this build's
// schema version as EncodeJSON writes it (it starts with that schemaVersion and ends with "}\n");
// anything else is decoded (and migrated) and written again, as State would have it.
func (c *Client) StateJSON(ctx context.Context, id string) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/harnesses/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOwnerGone, err)
	}
	b = bytes.TrimSuffix(b, []byte("\n")) // the line end the API adds after the document
	if bytes.HasPrefix(b, []byte(fmt.Sprintf("{\n  \"schemaVersion\": %d,\n", statefmt.SchemaVersion))) && bytes.HasSuffix(b, []byte("\n}\n")) {
		return b, nil
	}
	st, err := statefmt.DecodeJSON(b)
	if err != nil {
		return nil, err
	}
	return statefmt.EncodeJSON(st)
}

func (c *Client) Submit(ctx context.Context, s Submission) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/harnesses", SubmitRequest{Task: string(s.Task), Name: s.Name, Dir: s.Dir}, &out)
	return out.ID, err
}

func (c *Client) Decide(ctx context.Context, id, gate string, approve bool, reason string) (Decision, error) {
	if err := checkWords("", reason); err != nil { // JSON would carry a byte that is not UTF-8 as U+FFFD
		return Decision{}, err
	}
	action := "reject"
	if approve {
		action = "approve"
	}
	var d Decision
	err := c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/"+action, ActionRequest{Gate: gate, Reason: reason}, &d)
	return d, err
}

// actionResult is what pause, resume and stop answer.
type actionResult struct {
	Status statefmt.Status `json:"status"`
}

func (c *Client) Pause(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/pause", nil, &actionResult{})
}

func (c *Client) Resume(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/resume", nil, &actionResult{})
}

func (c *Client) Stop(ctx context.Context, id string) (statefmt.Status, error) {
	var r actionResult
	err := c.do(ctx, http.MethodPost, "/v1/harnesses/"+url.PathEscape(id)+"/stop", nil, &r)
	return r.Status, err
}

func (c *Client) Events(ctx context.Context, id string, after uint64, follow bool, f func(event.Event) error) error {
	path := fmt.Sprintf("/v1/harnesses/%s/events?after=%d", url.PathEscape(id), after)
	if !follow {
		var evs []event.Event
		if err := c.do(ctx, http.MethodGet, path, nil, &evs); err != nil {
			return err
		}
		for _, e := range evs {
			if err := f(e); err != nil {
				return err
			}
		}
		return nil
	}
	resp, err := c.send(ctx, http.MethodGet, path+"&follow=1", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var kind string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if kind == "end" {
				return nil
			}
			var e event.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				return fmt.Errorf("event stream: %w", err)
			}
			if err := f(e); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%w while following harness %s's events", ErrOwnerGone, id)
}

func (c *Client) Freeze(ctx context.Context, mode FreezeMode) error {
	return c.do(ctx, http.MethodPost, "/v1/freeze", FreezeRequest{Running: mode}, &Health{})
}

func (c *Client) Unfreeze(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/unfreeze", nil, &Health{})
}

func (c *Client) Report(ctx context.Context, since time.Duration) (*Report, error) {
	var r Report
	err := c.do(ctx, http.MethodGet, "/v1/report?since="+url.QueryEscape(since.String()), nil, &r)
	return &r, err
}

func (c *Client) Verify(ctx context.Context, id string) ([]store.Problem, error) {
	var p []store.Problem
	err := c.do(ctx, http.MethodGet, "/v1/verify?id="+url.QueryEscape(id), nil, &p)
	return p, err
}

var _ API = (*Client)(nil)
var _ API = (*Server)(nil)
