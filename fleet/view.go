package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// Device is one device as the fleet sees it: its last heartbeat.
type Device struct {
	Name      string    `json:"name"`
	Heartbeat Heartbeat `json:"heartbeat"`
	// SeenAgo is how long before the view was read the heartbeat reached JetStream.
	SeenAgo time.Duration `json:"seenAgo"`
}

// Harness is one harness of one device as the fleet sees it: its replicated index entry.
type Harness struct {
	Device string           `json:"device"`
	Entry  store.IndexEntry `json:"entry"`
	// ReplicatedAt is when JetStream stored the entry; Lag is how long after the checkpoint
	// was committed on the device that was.
	ReplicatedAt time.Time     `json:"replicatedAt"`
	Lag          time.Duration `json:"lag"`
}

// Fleet is what `fleet ls` shows.
type Fleet struct {
	Devices   []Device  `json:"devices"`
	Harnesses []Harness `json:"harnesses"`
	ReadAt    time.Time `json:"readAt"`
	// Unreadable are the heartbeats and index entries that do not decode: named, and left
	// out, so that one bad message does not hide the rest of the fleet.
	Unreadable []Unreadable `json:"unreadable,omitempty"`
}

// Unreadable is a message of the index stream that does not decode: a device's heartbeat
// (Harness "") or a harness's index entry.
type Unreadable struct {
	Device  string `json:"device"`
	Harness string `json:"harness,omitempty"`
	Error   string `json:"error"`
}

// List reads the fleet: every device's last heartbeat and every harness's last index entry,
// sorted by device and harness id.
func List(ctx context.Context, js jetstream.JetStream) (*Fleet, error) {
	s, err := js.Stream(ctx, StreamIndex)
	if err != nil {
		return nil, fmt.Errorf("the fleet's stream %s: %w (is this the hub, and has any device connected?)", StreamIndex, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subjectRoot+".>"))
	if err != nil {
		return nil, err
	}
	f := &Fleet{Devices: []Device{}, Harnesses: []Harness{}, ReadAt: time.Now().UTC()}
	subjects := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		subjects = append(subjects, subj)
	}
	slices.Sort(subjects)
	for _, subj := range subjects {
		dev, kind, id, ok := parseSubject(subj)
		if !ok {
			continue
		}
		m, err := s.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", subj, err)
		}
		switch kind {
		case "hb":
			d := Device{Name: dev, SeenAgo: f.ReadAt.Sub(m.Time)}
			if err := json.Unmarshal(m.Data, &d.Heartbeat); err != nil {
				f.Unreadable = append(f.Unreadable, Unreadable{Device: dev, Error: fmt.Sprintf("heartbeat of device %s is not valid: %v", dev, err)})
				continue
			}
			f.Devices = append(f.Devices, d)
		case "idx":
			h := Harness{Device: dev, ReplicatedAt: m.Time}
			if err := json.Unmarshal(m.Data, &h.Entry); err != nil {
				f.Unreadable = append(f.Unreadable, Unreadable{Device: dev, Harness: id, Error: fmt.Sprintf("index entry of %s/%s is not valid: %v", dev, id, err)})
				continue
			}
			h.Lag = max(0, m.Time.Sub(h.Entry.LastCheckpointAt))
			f.Harnesses = append(f.Harnesses, h)
		}
	}
	slices.SortFunc(f.Harnesses, func(a, b Harness) int {
		return cmpStrings(a.Device+"/"+a.Entry.ID, b.Device+"/"+b.Entry.ID)
	})
	return f, nil
}

func cmpStrings(a, b string) int { return strings.Compare(a, b) }

// Record is one replicated record: its sequence number, the envelope as the device stored
// it, and where the stream holds it.
type Record struct {
	Seq       uint64
	Envelope  []byte
	StreamSeq uint64
	// Gen is the harness's generation (HeaderGen): a harness deleted and created again
	// under the same id starts a new one.
	Gen string
}

// Records reads every replicated record of a device's harness, in the order JetStream holds
// them (which is the order the device sent them).
func Records(ctx context.Context, js jetstream.JetStream, device, id string) ([]Record, error) {
	var out []Record
	err := readSubject(ctx, js, Subject(device, "rec", id), func(m jetstream.Msg) error {
		seq, err := strconv.ParseUint(m.Headers().Get(HeaderSeq), 10, 64)
		if err != nil {
			return fmt.Errorf("a record of %s/%s has no valid %s header", device, id, HeaderSeq)
		}
		md, _ := m.Metadata()
		r := Record{Seq: seq, Envelope: m.Data(), Gen: m.Headers().Get(HeaderGen)}
		if md != nil {
			r.StreamSeq = md.Sequence.Stream
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// EventCount counts the replicated events of a device's harness.
func EventCount(ctx context.Context, js jetstream.JetStream, device, id string) (uint64, error) {
	return subjectCount(ctx, js, StreamLog, Subject(device, "evt", id))
}

func subjectCount(ctx context.Context, js jetstream.JetStream, stream, subj string) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, err
	}
	return info.State.Subjects[subj], nil
}

// readSubject calls f with every message the log stream holds on subj, oldest first.
func readSubject(ctx context.Context, js jetstream.JetStream, subj string, f func(jetstream.Msg) error) error {
	n, err := subjectCount(ctx, js, StreamLog, subj)
	if err != nil || n == 0 {
		return err
	}
	c, err := js.OrderedConsumer(ctx, StreamLog, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return err
	}
	defer dropConsumer(js, c)
	for got := uint64(0); got < n; {
		batch, err := c.Fetch(int(min(n-got, 512)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		before := got
		for m := range batch.Messages() {
			got++
			if err := f(m); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if got == before {
			return fmt.Errorf("%s: the stream holds %d messages but delivered %d", subj, n, got)
		}
	}
	return nil
}

// dropConsumer deletes a reader's consumer once it is done with it. A NATS server allows 1,000
// consumers a stream by default, and one left behind lives on for five minutes (an ordered
// consumer's inactivity threshold): a report of more than 1,000 harnesses, one consumer each,
// would fill the stream, and refuse every reader after it.
func dropConsumer(js jetstream.JetStream, c jetstream.Consumer) {
	info := c.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, StreamLog, info.Name)
}

// Shown is what `fleet show` rebuilds of a harness from what its device replicated.
type Shown struct {
	Device string                 `json:"device"`
	Entry  store.IndexEntry       `json:"entry"`
	State  *statefmt.HarnessState `json:"state"`
	// Records is how many records the hub holds for this harness (this generation, once
	// each); Verified how many of them (from the entry's keyframe to its head) were replayed,
	// hash by hash, to rebuild State.
	Records  int    `json:"records"`
	Verified int    `json:"verified"`
	Events   uint64 `json:"events"`
	// Duplicates are records held twice (the device sent one again past JetStream's window);
	// they are the same bytes, and only one is used.
	Duplicates int           `json:"duplicates"`
	Lag        time.Duration `json:"lag"`
	// ChainBytes is the size of the records replayed, as the device stored them.
	ChainBytes int `json:"chainBytes"`
}

// Show rebuilds a device's harness from the replicated records: the last index entry names
// the keyframe and the head; the records between them are replayed with engine (nil: the
// default) and every hash checked, as an import does.
func Show(ctx context.Context, js jetstream.JetStream, engine bridge.Engine, device, id string) (*Shown, error) {
	entry, at, err := entryOf(ctx, js, device, id)
	if err != nil {
		return nil, err
	}
	out := &Shown{Device: device, Entry: entry}
	out.Lag = max(0, at.Sub(out.Entry.LastCheckpointAt))
	recs, err := Records(ctx, js, device, id)
	if err != nil {
		return nil, err
	}
	chain, records, dups := chainOf(recs, out.Entry)
	out.Records, out.Duplicates = records, dups
	out.Verified = len(chain)
	for _, env := range chain {
		out.ChainBytes += len(env)
	}
	if out.State, err = store.Rebuild(engine, out.Entry, chain); err != nil {
		return nil, fmt.Errorf("device %s: the replicated records do not rebuild: %w", device, err)
	}
	if out.Events, err = EventCount(ctx, js, device, id); err != nil {
		return nil, err
	}
	return out, nil
}
