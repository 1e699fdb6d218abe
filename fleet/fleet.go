// Package fleet puts many devices' harnesses in one view on NATS JetStream. A device's daemon
// replicates its store (Replicator): every checkpoint record as stored, every event, each
// harness's index entry and task, in order and deduplicated by JetStream (Nats-Msg-Id),
// store-and-forward from a durable cursor kept beside the store, so that a step never waits
// on the network. It also answers requests from anywhere to approve or reject a gate, to pause,
// resume or tell a harness, or to adopt a harness of a device that is down (Responder),
// applying each request once. Adoption
// moves a harness's entry in the fence (the key-value bucket HE_FLEET_FENCE) by compare-and-set;
// each daemon asks the fence before a run and watches it while connected (Link.Guard). A hub
// (Hub) is an embedded nats-server with JetStream on disk; any machine with NATS access reads
// the fleet (View) and sends requests.
//
// Subjects (DEV is a device name, HID a harness id with '.' written '~'):
//
//	he.fleet.DEV.rec.HID    checkpoint records, as stored        stream HE_FLEET
//	he.fleet.DEV.evt.HID    events, as stored                    stream HE_FLEET
//	he.fleet.DEV.task.HID   the harness's task                   stream HE_FLEET
//	he.fleet.DEV.idx.HID    the index entry (last one kept)      stream HE_FLEET_INDEX
//	he.fleet.DEV.hb         the device's heartbeat (last kept)   stream HE_FLEET_INDEX
//	he.fleet.DEV.ctl        approve/reject/adopt/pause/resume/tell requests (request/reply)
//	$KV.HE_FLEET_FENCE.KEY  the owner of each adopted harness        bucket HE_FLEET_FENCE
package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream names.
const (
	StreamLog   = "HE_FLEET"
	StreamIndex = "HE_FLEET_INDEX"
)

// DedupWindow is how long JetStream remembers a message id: a message published again within
// it (a retry after a lost acknowledgement, a restart before the cursor was saved) is stored
// once. Past it, the durable cursor is what keeps a device from sending a message twice.
const DedupWindow = 24 * time.Hour

// Header names on replicated messages.
const (
	HeaderSeq     = "He-Seq"     // a record's sequence number or an event's number
	HeaderHarness = "He-Harness" // the harness id as the store spells it
	HeaderDevice  = "He-Device"
	// HeaderGen tells a harness from an earlier one of the same id: its creation time (Unix
	// nanoseconds, base 36).
	HeaderGen = "He-Gen"
)

const subjectRoot = "he.fleet"

var deviceRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidDevice checks a device name: 1-64 letters, digits, '_' or '-', starting with a letter
// or digit (it is one token of a NATS subject).
func ValidDevice(name string) error {
	if !deviceRe.MatchString(name) {
		return fmt.Errorf("device name %q is not valid: use 1-64 letters, digits, '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// DefaultDevice is the device name when none is given: the host name, cut to what a device
// name may hold.
func DefaultDevice() string {
	h, _ := os.Hostname()
	h, _, _ = strings.Cut(h, ".")
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		}
	}
	s := strings.TrimLeft(b.String(), "_-")
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		return "device"
	}
	return s
}

// token writes a harness id as a subject token: ids hold letters, digits, '.', '_' and '-',
// and '.' separates tokens, so it becomes '~' (which no id holds).
func token(id string) string { return strings.ReplaceAll(id, ".", "~") }

// untoken reverses token.
func untoken(t string) string { return strings.ReplaceAll(t, "~", ".") }

// Subject names the subject of kind (rec, evt, task, idx) for a device's harness.
func Subject(device, kind, id string) string {
	return subjectRoot + "." + device + "." + kind + "." + token(id)
}

func heartbeatSubject(device string) string { return subjectRoot + "." + device + ".hb" }

// ControlSubject is where a device's daemon answers requests.
func ControlSubject(device string) string { return subjectRoot + "." + device + ".ctl" }

// parseSubject splits a replicated subject into device, kind and harness id ("" for hb).
func parseSubject(subj string) (device, kind, id string, ok bool) {
	rest, found := strings.CutPrefix(subj, subjectRoot+".")
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, ".")
	switch {
	case len(parts) == 2 && parts[1] == "hb":
		return parts[0], "hb", "", true
	case len(parts) == 3:
		return parts[0], parts[1], untoken(parts[2]), true
	}
	return "", "", "", false
}

// Options says how to reach NATS.
type Options struct {
	URL string
	// Creds is a NATS credentials file (user JWT and seed), or "".
	Creds string
	// Name is the connection's name as the server shows it.
	Name string
}

// Connect connects to NATS. With retry it also starts while the server is unreachable and
// keeps reconnecting for ever (a device works offline); without it, an unreachable server is
// an error at once (a command someone typed). Publishes while disconnected fail at once
// rather than queueing in memory: the durable cursor is the queue.
func Connect(o Options, retry bool) (*nats.Conn, error) {
	if o.URL == "" {
		return nil, errors.New("no NATS URL: give --nats nats://HOST:4222")
	}
	opts := []nats.Option{nats.Name(o.Name), nats.ReconnectBufSize(-1), nats.Timeout(3 * time.Second)}
	if o.Creds != "" {
		if _, err := os.Stat(o.Creds); err != nil {
			return nil, fmt.Errorf("--nats-creds: %w", err)
		}
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if retry {
		opts = append(opts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(500*time.Millisecond))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("NATS at %s: %w", o.URL, err)
	}
	return nc, nil
}

// StreamConfigs are the two streams of the fleet: the log (records, events, tasks: kept, in
// order, deduplicated) and the index (the last index entry of each harness and the last
// heartbeat of each device).
func StreamConfigs() []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name:        StreamLog,
			Description: "harness-edge fleet: checkpoint records, events and tasks of every device",
			Subjects:    []string{subjectRoot + ".*.rec.*", subjectRoot + ".*.evt.*", subjectRoot + ".*.task.*"},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  DedupWindow,
		},
		{
			Name:              StreamIndex,
			Description:       "harness-edge fleet: the last index entry of each harness, the last heartbeat of each device",
			Subjects:          []string{subjectRoot + ".*.idx.*", subjectRoot + ".*.hb"},
			Storage:           jetstream.FileStorage,
			Retention:         jetstream.LimitsPolicy,
			MaxMsgsPerSubject: 1,
			Duplicates:        DedupWindow,
		},
	}
}

// EnsureStreams creates the fleet's streams and its fence bucket, or updates them to
// StreamConfigs and FenceConfig.
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range StreamConfigs() {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, FenceConfig()); err != nil {
		return fmt.Errorf("key-value bucket %s: %w", FenceBucket, err)
	}
	return nil
}
