package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// Request operations (Request.Op).
const (
	OpDecide = ""       // approve or reject a gate
	OpAdopt  = "adopt"  // adopt Request.Harness of device Request.From here
	OpPing   = "ping"   // answer, and do nothing: the daemon is connected
	OpPause  = "pause"  // pause Request.Harness
	OpResume = "resume" // resume Request.Harness
	OpTell   = "tell"   // store Request.Message for Request.Harness's next iteration
)

// Adoption is what a device answers to an adoption it applied.
type Adoption struct {
	Harness string          `json:"harness"`
	From    string          `json:"from"`
	To      string          `json:"to"`
	Status  statefmt.Status `json:"status"`
	HeadSeq uint64          `json:"headSeq"`
	// Records were replayed and verified, hash by hash, from the keyframe to the head (the
	// harness's own; its sub-agents' were verified the same way).
	Records int `json:"records"`
	Events  int `json:"events"`
	// Harnesses are the family that moved: the harness first, then its sub-agents.
	Harnesses []string `json:"harnesses,omitempty"`
	// FenceRevision is the fence entry's revision that made To the owner.
	FenceRevision uint64 `json:"fenceRevision"`
	// Resumed says the daemon queued the harness to run; Waiting lists the gates it waits
	// on instead.
	Resumed bool     `json:"resumed"`
	Waiting []string `json:"waiting,omitempty"`
	// ResumeError says why the daemon did not resume it (it is stored here all the same).
	ResumeError string `json:"resumeError,omitempty"`
}

// Replicated is one harness as the hub holds it: enough to rebuild it elsewhere.
type Replicated struct {
	Entry   store.IndexEntry
	Replica store.Replica
}

// ReadReplicated reads what the hub holds of a device's harness: its last index entry (as the
// device stored it), its task, its records from the entry's keyframe to its head and its
// events, all of the entry's generation, each once.
func ReadReplicated(ctx context.Context, js jetstream.JetStream, device, id string) (*Replicated, error) {
	s, err := js.Stream(ctx, StreamIndex)
	if err != nil {
		return nil, fmt.Errorf("the fleet's stream %s: %w", StreamIndex, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, Subject(device, "idx", id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: the fleet holds no harness %s on device %s (see `harness-edge fleet ls`)", store.ErrNotFound, id, device)
	}
	if err != nil {
		return nil, err
	}
	out := &Replicated{}
	out.Replica.IndexJSON = m.Data
	if err := json.Unmarshal(m.Data, &out.Entry); err != nil {
		return nil, fmt.Errorf("index entry of %s/%s is not valid: %w", device, id, err)
	}
	gen := strconv.FormatInt(out.Entry.CreatedAt.UnixNano(), 36)
	recs, err := Records(ctx, js, device, id)
	if err != nil {
		return nil, err
	}
	out.Replica.Records, _, _ = chainOf(recs, out.Entry)
	err = readSubject(ctx, js, Subject(device, "task", id), func(m jetstream.Msg) error {
		if m.Headers().Get(HeaderGen) == gen {
			out.Replica.Task = m.Data()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var events []store.ReplicaEvent
	err = readSubject(ctx, js, Subject(device, "evt", id), func(m jetstream.Msg) error {
		if m.Headers().Get(HeaderGen) != gen {
			return nil
		}
		n, err := strconv.ParseUint(m.Headers().Get(HeaderSeq), 10, 64)
		if err != nil {
			return fmt.Errorf("an event of %s/%s has no valid %s header", device, id, HeaderSeq)
		}
		events = append(events, store.ReplicaEvent{N: n, Data: m.Data()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	// In order by number, each once (as chainOf does for the records).
	slices.SortStableFunc(events, func(a, b store.ReplicaEvent) int { return cmp.Compare(a.N, b.N) })
	var last uint64
	for _, ev := range events {
		if ev.N > last {
			out.Replica.Events = append(out.Replica.Events, ev)
			last = ev.N
		}
	}
	return out, nil
}

// chainOf picks, from a harness's replicated records, those of the entry's generation from
// its keyframe to its head, each once, in order; it also counts the records of the generation
// and the duplicates among them. The stream holds a device's records in the order it made
// them, except after a message JetStream refused while it took the next ones (the device
// sends it again, after them): they are put back in order by number.
func chainOf(recs []Record, e store.IndexEntry) (chain [][]byte, records, duplicates int) {
	var last uint64
	gen := strconv.FormatInt(e.CreatedAt.UnixNano(), 36)
	recs = slices.Clone(recs)
	slices.SortStableFunc(recs, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, r := range recs {
		switch {
		case r.Gen != gen:
			continue // an earlier harness of the same id
		case r.Seq <= last:
			duplicates++
			continue
		case r.Seq < e.KeyframeSeq || r.Seq > e.HeadSeq:
		default:
			chain = append(chain, r.Envelope)
		}
		records++
		last = r.Seq
	}
	return chain, records, duplicates
}

// pingWait bounds how long an adopting device waits for the harness's device to answer.
const pingWait = 2 * time.Second

// Alive asks a device's daemon to answer: nil when it is connected to NATS and answers.
func Alive(ctx context.Context, nc *nats.Conn, device string) error {
	data, _ := json.Marshal(Request{ID: NewRequestID(), Op: OpPing})
	ctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	_, err := nc.RequestWithContext(ctx, ControlSubject(device), data)
	return err
}

// adopter applies adoptions on a device: it rebuilds the harness from the hub, makes the
// device its owner in the fence, stores it and resumes it.
type adopter struct {
	nc     *nats.Conn
	device string
	srv    *control.Server
}

func refused(format string, args ...any) error {
	return &refusal{fmt.Sprintf(format, args...)}
}

// refusal is an adoption refused: nothing changed.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// adopt applies an adoption. Every refusal comes before the fence moves and changes nothing.
// Once the fence names this device, a failure is reported as such, and the same request sent
// again goes on from where it stopped.
func (a *adopter) adopt(ctx context.Context, req Request) (Adoption, error) {
	out := Adoption{Harness: req.Harness, From: req.From, To: a.device}
	js, err := jetstream.New(a.nc)
	if err != nil {
		return out, err
	}
	rep, err := ReadReplicated(ctx, js, req.From, req.Harness)
	if err != nil {
		return out, err
	}
	e := rep.Entry
	out.Status, out.HeadSeq, out.Records, out.Events = e.Status, e.HeadSeq, len(rep.Replica.Records), len(rep.Replica.Events)
	if e.ParentHarnessID != "" {
		return out, refused("harness %s/%s is a sub-agent of %s: adopt %s/%s (its sub-agents go with it); nothing was changed", req.From, e.ID, e.ParentHarnessID, req.From, e.ParentHarnessID)
	}
	kv, err := js.KeyValue(ctx, FenceBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, FenceConfig())
	}
	if err != nil {
		return out, fmt.Errorf("the fence bucket %s: %w", FenceBucket, err)
	}
	fence, err := ReadFence(ctx, kv, e)
	if err != nil {
		return out, err
	}
	ours := fence != nil && fence.Owner == a.device && fence.Request == req.ID
	db := a.srv.Store()
	if _, err := db.Index(e.ID); err == nil {
		if ours {
			// Applied before, up to the store: only the answer was lost.
			out.FenceRevision = fence.Revision
			return a.resume(ctx, out), nil
		}
		return out, refused("%v: device %s already holds a harness %s; nothing was changed (delete or export it there first)", store.ErrExists, a.device, e.ID)
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, err
	}
	if fence != nil && fence.Owner != req.From && !ours {
		return out, refused("harness %s/%s was adopted by device %s (request %s, %s): it is that device's now; nothing was changed",
			req.From, e.ID, fence.Owner, fence.Request, fence.At.Format(time.RFC3339))
	}
	if !ours {
		switch e.Status {
		case statefmt.StatusCompleted, statefmt.StatusFailed:
			return out, refused("harness %s/%s is %s: there is nothing to resume; nothing was changed", req.From, e.ID, e.Status)
		}
		err := Alive(ctx, a.nc, req.From)
		switch {
		case err == nil:
			return out, refused("device %s is online (its daemon answers on NATS) and runs harness %s itself: adopt a harness from a device that is down or cut off; nothing was changed", req.From, e.ID)
		case !errors.Is(err, nats.ErrNoResponders):
			return out, refused("device %s did not say whether it is down (%v): its daemon may be connected and busy; nothing was changed", req.From, err)
		}
	}
	opts := store.ImportOptions{DryRun: true, CheckTask: func(id string, raw []byte) error {
		_, err := task.Parse("the replicated task of harness "+id, raw)
		return err
	}}
	// The family: every sub-agent the root's state lists (and theirs), as the hub holds it.
	family, err := db.ReplicaFamily(rep.Replica, func(id string) (store.Replica, error) {
		sub, err := ReadReplicated(ctx, js, req.From, id)
		if err != nil {
			return store.Replica{}, err
		}
		return sub.Replica, nil
	})
	if err != nil {
		return out, refused("the hub's copy does not rebuild here: %v; nothing was changed", err)
	}
	sum, err := db.ImportReplicas(family, opts)
	if err != nil {
		return out, refused("the hub's copy does not rebuild here: %v", err)
	}
	out.Harnesses = sum.Harnesses
	if ours {
		out.FenceRevision = fence.Revision
	} else {
		rev, err := TakeFence(ctx, kv, e, fence, Fence{Owner: a.device, From: req.From, Request: req.ID, At: time.Now().UTC()})
		if errors.Is(err, ErrFenceMoved) {
			return out, refused("harness %s/%s: another adoption took it meanwhile (%v); nothing was changed", req.From, e.ID, err)
		}
		if err != nil {
			return out, fmt.Errorf("the fence of harness %s was not taken (nothing was changed): %w", e.ID, err)
		}
		out.FenceRevision = rev
	}
	opts.DryRun = false
	if _, err := db.ImportReplicas(family, opts); err != nil {
		return out, fmt.Errorf("device %s owns harness %s in the fence now (revision %d), but storing it failed: %w; send the same request again (the same --request-id) to finish", a.device, e.ID, out.FenceRevision, err)
	}
	return a.resume(ctx, out), nil
}

// resume queues the adopted harness on this device's daemon.
func (a *adopter) resume(ctx context.Context, out Adoption) Adoption {
	err := a.srv.Resume(ctx, out.Harness)
	var w *control.WaitingError
	switch {
	case err == nil:
		out.Resumed = true
	case errors.As(err, &w):
		for _, g := range w.Gates {
			out.Waiting = append(out.Waiting, g.Gate.ID)
		}
	default:
		out.ResumeError = err.Error()
	}
	return out
}
