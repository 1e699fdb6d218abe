package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// entryOf reads the last replicated index entry of a device's harness.
func entryOf(ctx context.Context, js jetstream.JetStream, device, id string) (store.IndexEntry, time.Time, error) {
	var e store.IndexEntry
	if err := ValidDevice(device); err != nil {
		return e, time.Time{}, err
	}
	if err := store.ValidID(id); err != nil {
		return e, time.Time{}, err
	}
	s, err := js.Stream(ctx, StreamIndex)
	if err != nil {
		return e, time.Time{}, fmt.Errorf("the fleet's stream %s: %w", StreamIndex, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, Subject(device, "idx", id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return e, time.Time{}, fmt.Errorf("%w: the fleet holds no harness %s on device %s (see `harness-edge fleet ls`)", store.ErrNotFound, id, device)
	}
	if err != nil {
		return e, time.Time{}, err
	}
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return e, time.Time{}, fmt.Errorf("index entry of %s/%s is not valid: %w", device, id, err)
	}
	return e, m.Time, nil
}

// maxMissing bounds the event numbers Events waits for below the newest it printed.
const maxMissing = 1 << 16

// Events calls f with the replicated events of a device's harness (the generation its last
// index entry names), in the order the stream holds them (the device's order), each once,
// decoded as the device's own event log decodes them. With follow it goes on with the events the device sends next until ctx ends, which
// then is no error.
func Events(ctx context.Context, js jetstream.JetStream, device, id string, follow bool, f func(event.Event) error) error {
	entry, _, err := entryOf(ctx, js, device, id)
	if err != nil {
		return err
	}
	gen := strconv.FormatInt(entry.CreatedAt.UnixNano(), 36)
	subj := Subject(device, "evt", id)
	n, err := subjectCount(ctx, js, StreamLog, subj)
	if err != nil || (n == 0 && !follow) {
		return err
	}
	c, err := js.OrderedConsumer(ctx, StreamLog, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return err
	}
	defer dropConsumer(js, c)
	var got, last uint64
	missing := map[uint64]bool{}
	for follow || got < n {
		if follow && ctx.Err() != nil {
			return nil
		}
		want := 512
		if !follow {
			want = int(min(n-got, 512))
		}
		batch, err := c.Fetch(want, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil
			}
			return err
		}
		before := got
		for m := range batch.Messages() {
			got++
			if m.Headers().Get(HeaderGen) != gen {
				continue // an earlier harness of the same id
			}
			seq, err := strconv.ParseUint(m.Headers().Get(HeaderSeq), 10, 64)
			if err != nil {
				return fmt.Errorf("an event of %s/%s has no valid %s header", device, id, HeaderSeq)
			}
			switch {
			case seq > last:
				// Numbers skipped here come later: a message refused in the device's window
				// is held after the ones that followed it.
				for n := last + 1; n < seq && len(missing) < maxMissing; n++ {
					missing[n] = true
				}
				last = seq
			case missing[seq]:
				delete(missing, seq)
			default:
				continue // sent again by the device past JetStream's window
			}
			e, err := event.Decode(id, seq, m.Data())
			if err != nil {
				return fmt.Errorf("device %s: %w", device, err)
			}
			if err := f(e); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil && !(follow && (errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded))) {
			if follow && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !follow && got == before {
			return fmt.Errorf("%s: the stream holds %d messages but delivered %d", subj, n, got)
		}
	}
	return nil
}
