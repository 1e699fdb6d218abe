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
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/internal/ident"
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

// ValidDevice checks a device name: 1-64 letters, digits, '_' or '-', starting with a letter
// or digit (it is one token of a NATS subject).
func ValidDevice(name string) error {
	if !ident.Valid(name, 64, "_-") {
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
	// CA is a PEM file of the certificate authorities that sign the server's certificate, or ""
	// (the system's roots). Giving it turns TLS on.
	CA string
	// Cert and Key are the client's certificate and its private key (PEM), for a server that
	// verifies clients (mutual TLS); both or neither. Giving them turns TLS on.
	Cert, Key string
	// Name is the connection's name as the server shows it.
	Name string
	// InboxPrefix, when set, replaces _INBOX as the prefix of the connection's reply subjects
	// (JetStream's acknowledgements and answers come there), so that a user may be allowed to
	// subscribe to its own replies only.
	InboxPrefix string
	// Unreachable, when set, is called with the error of each failed attempt to connect again
	// (with Connect's retry), and Reached once an attempt succeeds.
	Unreachable func(error)
	Reached     func()
	// Refused, when set, is called when the server refuses a publish or a subscription on a
	// connection that stays up (a permissions violation: the user may not use that subject).
	// Without it such a refusal is seen only as a request that is never answered.
	Refused func(error)
}

// OptionError is a file of Options that cannot be used: Flag names the command-line flag that
// gives it.
type OptionError struct {
	Flag, File string
	Err        error
}

func (e *OptionError) Error() string {
	if e.File == "" {
		return e.Flag + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s %s: %v", e.Flag, e.File, e.Err)
}

func (e *OptionError) Unwrap() error { return e.Err }

// Check checks the files Options names before anything connects: each must be a readable
// file, the CA a PEM certificate, and a client certificate comes with its key.
func (o Options) Check() error {
	switch {
	case o.Cert != "" && o.Key == "":
		return &OptionError{Flag: "--nats-cert", File: o.Cert, Err: errors.New("a client certificate needs its private key: give --nats-key FILE too")}
	case o.Key != "" && o.Cert == "":
		return &OptionError{Flag: "--nats-key", File: o.Key, Err: errors.New("a private key needs its client certificate: give --nats-cert FILE too")}
	}
	for _, f := range []struct{ flag, file string }{{"--nats-creds", o.Creds}, {"--nats-ca", o.CA}, {"--nats-cert", o.Cert}, {"--nats-key", o.Key}} {
		if f.file == "" {
			continue
		}
		b, err := os.ReadFile(f.file)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return &OptionError{Flag: f.flag, File: f.file, Err: fmt.Errorf("cannot read it: %w", err)}
		}
		if f.flag == "--nats-ca" && !x509.NewCertPool().AppendCertsFromPEM(b) {
			return &OptionError{Flag: f.flag, File: f.file, Err: errors.New("holds no PEM certificate (want the CA's certificate, -----BEGIN CERTIFICATE-----)")}
		}
	}
	if o.Cert != "" {
		if _, err := tls.LoadX509KeyPair(o.Cert, o.Key); err != nil {
			return &OptionError{Flag: "--nats-cert", File: o.Cert, Err: fmt.Errorf("with --nats-key %s: %w", o.Key, err)}
		}
	}
	return nil
}

// Connect connects to NATS. With retry it also starts while the server is unreachable and
// keeps reconnecting for ever (a device works offline); without it, an unreachable server is
// an error at once (a command someone typed). Publishes while disconnected fail at once
// rather than queueing in memory: the durable cursor is the queue.
func Connect(o Options, retry bool) (*nats.Conn, error) {
	if o.URL == "" {
		return nil, errors.New("no NATS URL: give --nats nats://HOST:4222")
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	opts := []nats.Option{nats.Name(o.Name), nats.ReconnectBufSize(-1), nats.Timeout(3 * time.Second)}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	if o.Refused != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				o.Refused(err)
			}
		}))
	}
	if o.CA != "" {
		opts = append(opts, nats.RootCAs(o.CA))
	}
	if o.Cert != "" {
		opts = append(opts, nats.ClientCert(o.Cert, o.Key))
	}
	if o.Unreachable != nil {
		opts = append(opts, nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { o.Unreachable(fmt.Errorf("%w%s", err, connectHint(err, o))) }))
	}
	if o.Reached != nil {
		opts = append(opts, nats.ConnectHandler(func(*nats.Conn) { o.Reached() }), nats.ReconnectHandler(func(*nats.Conn) { o.Reached() }))
	}
	if retry {
		opts = append(opts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(500*time.Millisecond))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("NATS at %s: %w%s", o.URL, err, connectHint(err, o))
	}
	return nc, nil
}

// tlsRefused tells a server that ended the TLS handshake over the client's certificate: with
// TLS 1.3 the client learns it as an alert or as the connection closed right after.
func tlsRefused(err error) bool {
	m := err.Error()
	for _, s := range []string{"tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority", "connection closed by remote after TLS handshake"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// connectHint says what to do about a refused connection where the error alone does not.
func connectHint(err error, o Options) string {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &unknown) && o.CA == "":
		return " (the server's certificate is not signed by a CA this machine trusts: give the fleet's CA with --nats-ca FILE)"
	case errors.As(err, &unknown):
		return fmt.Sprintf(" (the server's certificate is not signed by the CA in --nats-ca %s)", o.CA)
	case errors.As(err, &hostname):
		return " (the server's certificate does not name the host in the URL)"
	case errors.Is(err, nats.ErrSecureConnRequired):
		return " (use a tls:// URL, or give --nats-ca)"
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return " (check --nats-creds)"
	case tlsRefused(err) && o.Cert == "":
		return " (the server verifies clients: give a client certificate with --nats-cert FILE --nats-key FILE)"
	case tlsRefused(err):
		return fmt.Sprintf(" (the server refused the client certificate --nats-cert %s: is it signed by a CA the server trusts, and still valid?)", o.Cert)
	}
	return ""
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
			// A device asks for the last record it sent of a harness after a restart, to tell
			// the records a keyframe released that the hub holds from those it lost.
			AllowDirect: true,
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
