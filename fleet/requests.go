package fleet

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/inbox"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// Request asks a device to approve or reject a gate, or (Op OpAdopt) to adopt a harness of
// another device. ID makes it idempotent: the device applies a request once, and answers a
// repeat of it with the first answer.
type Request struct {
	ID string `json:"id"`
	Op string `json:"op,omitempty"`
	// From is the device whose harness an adoption takes.
	From    string `json:"from,omitempty"`
	Harness string `json:"harness"`
	Gate    string `json:"gate,omitempty"`
	Approve bool   `json:"approve"`
	Reason  string `json:"reason,omitempty"`
	// Message is what OpTell stores for the harness's next iteration.
	Message string `json:"message,omitempty"`
}

// ErrorKind says what kind of error a device answered. The strings are stable.
type ErrorKind string

const (
	KindNone     ErrorKind = ""
	KindBadInput ErrorKind = "bad_input" // the request is malformed; nothing changed
	KindNotFound ErrorKind = "not_found" // the device holds no such harness
	KindRefused  ErrorKind = "refused"   // the harness refused the decision; nothing changed
	KindWaiting  ErrorKind = "waiting"   // resumed, the harness waits on a gate for a human
)

// Reply is a device's answer.
type Reply struct {
	RequestID string            `json:"requestId"`
	Device    string            `json:"device"`
	Decision  *control.Decision `json:"decision,omitempty"`
	Adopted   *Adoption         `json:"adopted,omitempty"`
	// Status is the harness's status once a pause or a resume was applied.
	Status statefmt.Status `json:"status,omitempty"`
	// Told is the message a tell stored.
	Told *control.Told `json:"told,omitempty"`
	// Repeated says the request was applied before: this is the answer it got then.
	Repeated bool      `json:"repeated,omitempty"`
	Error    string    `json:"error,omitempty"`
	Kind     ErrorKind `json:"kind,omitempty"`
}

// Decider applies a decision on a gate: control.Server's Decide, the path approve and reject
// take on the device itself.
type Decider interface {
	Decide(ctx context.Context, id, gate string, approve bool, reason string) (control.Decision, error)
}

// Controller pauses, resumes and tells a harness: control.Server's methods, the paths pause,
// resume and tell take on the device itself.
type Controller interface {
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Tell(ctx context.Context, id, text string) (control.Told, error)
	State(ctx context.Context, id string) (*statefmt.HarnessState, error)
}

// RequestsFile keeps, in the store directory, the requests a device applied and their
// answers, one JSON line each, synced before the answer goes out.
const RequestsFile = "fleet-requests.jsonl"

// Responder answers a device's requests (he.fleet.DEV.ctl) through a Decider.
type Responder struct {
	device string
	dec    Decider
	dir    string
	log    *slog.Logger

	// adopt applies adoptions (nil: this responder refuses them).
	adopt func(context.Context, Request) (Adoption, error)

	mu   sync.Mutex
	done map[string]Reply
	file *os.File
}

// NewResponder opens (or creates) the request log in dir.
func NewResponder(dir, device string, dec Decider, log *slog.Logger) (*Responder, error) {
	if err := ValidDevice(device); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Responder{device: device, dec: dec, dir: dir, log: log, done: map[string]Reply{}}
	path := filepath.Join(dir, RequestsFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fleet request log: %w", err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	line := 0
	for sc.Scan() {
		line++
		var rep Reply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil || rep.RequestID == "" {
			// A line cut by a crash (the last one) was never answered: its request may come again.
			log.Warn("fleet: request log line is not valid; ignoring it", "file", path, "line", line)
			continue
		}
		r.done[rep.RequestID] = rep
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, fmt.Errorf("fleet request log %s: %w", path, err)
	}
	r.file = f
	return r, nil
}

// Close closes the request log.
func (r *Responder) Close() error { return r.file.Close() }

// Subscribe answers requests on the device's control subject until the subscription ends.
// NATS calls the handler for one message at a time, so two copies of a request never race.
func (r *Responder) Subscribe(nc *nats.Conn) (*nats.Subscription, error) {
	return nc.Subscribe(ControlSubject(r.device), func(m *nats.Msg) {
		rep := r.Handle(context.Background(), m.Data)
		data, _ := json.Marshal(rep)
		if err := m.Respond(data); err != nil {
			r.log.Warn("fleet: answering a request", "request", rep.RequestID, "err", err)
		}
	})
}

// maxRequest holds a request whose text (a reason, a told message) is at its 64 KiB limit
// however JSON escapes it, six bytes a byte at worst, and the rest of the request.
const maxRequest = 6*control.MaxReason + 64<<10

// Handle applies one request (its JSON) and returns the answer. A request applied before is
// not applied again: its first answer comes back, marked Repeated. A refused request changes
// nothing and is not remembered, so it may be sent again once the harness is ready for it.
func (r *Responder) Handle(ctx context.Context, data []byte) Reply {
	rep := Reply{Device: r.device}
	if len(data) > maxRequest {
		rep.Error, rep.Kind = fmt.Sprintf("request is %d bytes, more than %d", len(data), maxRequest), KindBadInput
		return rep
	}
	if i := task.InvalidUTF8(data); i >= 0 {
		// encoding/json would read each such byte as U+FFFD: a reason would be recorded changed.
		rep.Error, rep.Kind = fmt.Sprintf("request is not UTF-8: the byte 0x%02X at byte offset %d is not valid UTF-8, and JSON text must be", data[i], i), KindBadInput
		return rep
	}
	var req Request
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		rep.Error, rep.Kind = "request is not valid JSON: "+err.Error(), KindBadInput
		return rep
	}
	if i := task.LoneSurrogate(data); i >= 0 {
		// Half a surrogate pair is no character: encoding/json read it as U+FFFD.
		rep.Error, rep.Kind = fmt.Sprintf("request is not UTF-8: the escape %s at byte offset %d is half of a UTF-16 surrogate pair, which no UTF-8 text holds", data[i:i+6], i), KindBadInput
		return rep
	}
	rep.RequestID = req.ID
	switch {
	case req.Op == OpPing:
		return rep
	case req.Op != OpDecide && req.Op != OpAdopt && req.Op != OpPause && req.Op != OpResume && req.Op != OpTell:
		rep.Error, rep.Kind = fmt.Sprintf("request op %q is not one this device knows (%q, %q, %q, %q, %q, %q)", req.Op, OpDecide, OpAdopt, OpPause, OpResume, OpTell, OpPing), KindBadInput
		return rep
	case req.ID == "" || len(req.ID) > 128:
		rep.Error, rep.Kind = "request has no id (1-128 characters): a retry could not be told from a new request", KindBadInput
		return rep
	case req.Op == OpAdopt:
		if err := ValidDevice(req.From); err != nil {
			rep.Error, rep.Kind = "adoption: "+err.Error(), KindBadInput
			return rep
		}
		if req.From == r.device {
			rep.Error, rep.Kind = fmt.Sprintf("adoption: harness %s is on this device (%s) already", req.Harness, r.device), KindBadInput
			return rep
		}
	case req.Op == OpTell:
		if err := inbox.Check(req.Message); err != nil {
			rep.Error, rep.Kind = "message: "+err.Error(), KindBadInput
			return rep
		}
	case req.Op == OpPause || req.Op == OpResume:
	case !req.Approve && strings.TrimSpace(req.Reason) == "":
		rep.Error, rep.Kind = "a rejection needs a reason", KindBadInput
		return rep
	}
	if err := store.ValidID(req.Harness); err != nil {
		rep.Error, rep.Kind = err.Error(), KindBadInput
		return rep
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.done[req.ID]; ok {
		prev.Repeated = true
		return prev
	}
	if req.Op == OpAdopt {
		return r.handleAdopt(ctx, req, rep)
	}
	if req.Op == OpPause || req.Op == OpResume || req.Op == OpTell {
		return r.handleControl(ctx, req, rep)
	}
	d, err := r.dec.Decide(ctx, req.Harness, req.Gate, req.Approve, req.Reason)
	if err != nil {
		rep.Error, rep.Kind = err.Error(), kindOf(err)
		return rep
	}
	rep.Decision = &d
	r.remember(rep)
	verb := "approved"
	if !req.Approve {
		verb = "rejected"
	}
	r.log.Info("fleet: gate "+verb+" by request", "request", req.ID, "harness", req.Harness, "gate", d.Gate.ID)
	return rep
}

// kindOf says what kind of error a control.Server method returned.
func kindOf(err error) ErrorKind {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return KindNotFound
	case errors.Is(err, control.ErrBadInput), errors.Is(err, store.ErrInvalidID):
		return KindBadInput
	case errors.Is(err, control.ErrWaiting):
		return KindWaiting
	}
	return KindRefused
}

// handleControl applies a pause, a resume or a tell through the device's control.Server; r.mu
// is held. A refused one is not remembered: it changed nothing, and may be sent again.
func (r *Responder) handleControl(ctx context.Context, req Request, rep Reply) Reply {
	c, ok := r.dec.(Controller)
	if !ok {
		rep.Error, rep.Kind = "this daemon does not take "+req.Op+" requests", KindRefused
		return rep
	}
	var err error
	switch req.Op {
	case OpPause:
		err = c.Pause(ctx, req.Harness)
	case OpResume:
		err = c.Resume(ctx, req.Harness)
	case OpTell:
		var told control.Told
		if told, err = c.Tell(ctx, req.Harness, req.Message); err == nil {
			rep.Told = &told
		}
	}
	if err != nil {
		rep.Error, rep.Kind = err.Error(), kindOf(err)
		return rep
	}
	if req.Op != OpTell {
		if st, err := c.State(ctx, req.Harness); err == nil {
			rep.Status = st.Status
		}
	}
	r.remember(rep)
	r.log.Info("fleet: "+req.Op+" applied by request", "request", req.ID, "harness", req.Harness)
	return rep
}

// remember writes an applied request's answer to the request log (synced) and keeps it.
func (r *Responder) remember(rep Reply) {
	line, _ := json.Marshal(rep)
	if _, err := r.file.Write(append(line, '\n')); err == nil {
		err = r.file.Sync()
	} else {
		r.log.Error("fleet: the request log could not be written; a retry of this request would be refused as already applied", "request", rep.RequestID, "err", err)
	}
	r.done[rep.RequestID] = rep
}

// handleAdopt applies an adoption; r.mu is held. A refused one is not remembered: it changed
// nothing, and may be sent again.
func (r *Responder) handleAdopt(ctx context.Context, req Request, rep Reply) Reply {
	if r.adopt == nil {
		rep.Error, rep.Kind = "this daemon does not adopt harnesses", KindRefused
		return rep
	}
	a, err := r.adopt(ctx, req)
	if err != nil {
		rep.Error, rep.Kind = "adoption of "+req.From+"/"+req.Harness+": "+err.Error(), kindOf(err)
		return rep
	}
	rep.Adopted = &a
	r.remember(rep)
	r.log.Info("fleet: harness adopted by request", "request", req.ID, "harness", req.Harness, "from", req.From, "fence", a.FenceRevision, "resumed", a.Resumed)
	return rep
}

// NewRequestID returns a random request id.
func NewRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DeviceError is an error a device answered.
type DeviceError struct {
	Device string
	Kind   ErrorKind
	Msg    string
}

func (e *DeviceError) Error() string { return "device " + e.Device + ": " + e.Msg }

// Is lets errors.Is match store.ErrNotFound, control.ErrBadInput and control.ErrWaiting.
func (e *DeviceError) Is(target error) bool {
	switch e.Kind {
	case KindNotFound:
		return target == store.ErrNotFound
	case KindBadInput:
		return target == control.ErrBadInput
	case KindWaiting:
		return target == control.ErrWaiting
	}
	return false
}

// Decide sends a request to a device and waits for its answer, sending it again (the same id)
// every attempt while no answer comes, until ctx ends. The device applies it once.
func Decide(ctx context.Context, nc *nats.Conn, device string, req Request, attempt time.Duration) (Reply, error) {
	if err := ValidDevice(device); err != nil {
		return Reply{}, err
	}
	data, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	var last error
	// noResponders: every attempt that ended on its own found no daemon subscribed (one cut
	// short by ctx's end says nothing either way).
	noResponders := false
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		m, err := nc.RequestWithContext(actx, ControlSubject(device), data)
		cancel()
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, nats.ErrNoResponders):
			noResponders = true
		default:
			noResponders = false
		}
		if err == nil {
			var rep Reply
			if err := json.Unmarshal(m.Data, &rep); err != nil {
				return Reply{}, fmt.Errorf("device %s answered something that is not a reply: %w", device, err)
			}
			if rep.Error != "" {
				return rep, &DeviceError{Device: device, Kind: rep.Kind, Msg: rep.Error}
			}
			return rep, nil
		}
		last = err
		select {
		case <-ctx.Done():
			if noResponders {
				return Reply{}, fmt.Errorf("device %s does not answer: its daemon is not connected to NATS (offline, or not started with --nats); request %s was not applied", device, req.ID)
			}
			return Reply{}, fmt.Errorf("device %s did not answer request %s in time (%v); sending it again with --request-id %s applies it at most once", device, req.ID, last, req.ID)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
