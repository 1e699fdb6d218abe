package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/store"
)

// LinkConfig configures a device's link to the fleet.
type LinkConfig struct {
	NATS    Options
	Device  string
	Version string
	Log     *slog.Logger
	// Poll is the replicator's Poll (default 1 s).
	Poll time.Duration
}

// Link joins a daemon to the fleet: a Replicator (its Emit is one of the daemon's event
// sinks) and a Responder for requests. Run goes beside the daemon's scheduler
// (control.DaemonConfig.Beside).
type Link struct {
	cfg LinkConfig
	nc  *nats.Conn
	// Replicator is the link's replicator: add it to the daemon's event sinks.
	Replicator *Replicator
}

// NewLink connects to NATS (the server may be unreachable: the link keeps trying, and the
// device works offline meanwhile).
func NewLink(cfg LinkConfig) (*Link, error) {
	if err := ValidDevice(cfg.Device); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.NATS.Name == "" {
		cfg.NATS.Name = "harness-edge device " + cfg.Device
	}
	if cfg.NATS.InboxPrefix == "" {
		// The device's replies come under _INBOX.DEV: it may be allowed _INBOX.DEV.> alone, and
		// then no device sees what another reads (docs/fleet.md, "Security").
		cfg.NATS.InboxPrefix = DeviceInbox(cfg.Device)
	}
	// Say why NATS cannot be reached (a refused certificate, refused credentials), once per
	// reason rather than at each attempt, and when it is reached again.
	var mu sync.Mutex
	var last string
	if cfg.NATS.Unreachable == nil {
		cfg.NATS.Unreachable = func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if err.Error() != last {
				last = err.Error()
				cfg.Log.Warn("fleet: cannot reach NATS; the device works offline and keeps trying", "nats", cfg.NATS.URL, "err", err)
			}
		}
	}
	if cfg.NATS.Reached == nil {
		cfg.NATS.Reached = func() {
			mu.Lock()
			defer mu.Unlock()
			if last != "" {
				last = ""
				cfg.Log.Info("fleet: NATS reached", "nats", cfg.NATS.URL)
			}
		}
	}
	if cfg.NATS.Refused == nil {
		cfg.NATS.Refused = func(err error) {
			cfg.Log.Warn("fleet: NATS refused a subject to this device's user (see the permissions in docs/fleet.md)", "err", err)
		}
	}
	nc, err := Connect(cfg.NATS, true)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	r, err := NewReplicator(js, cfg.Device)
	if err != nil {
		nc.Close()
		return nil, err
	}
	r.Version, r.Log = cfg.Version, cfg.Log
	if cfg.Poll > 0 {
		r.Poll = cfg.Poll
	}
	return &Link{cfg: cfg, nc: nc, Replicator: r}, nil
}

// Join makes the daemon cfg configures a device of the fleet: the replicator becomes one of its
// event sinks and reads its store from the first checkpoint on, Run goes beside its scheduler,
// and Guard keeps it from running a harness another device adopted.
func (l *Link) Join(cfg *control.DaemonConfig) {
	cfg.Options.Sinks = append(cfg.Options.Sinks, l.Replicator)
	cfg.Opened = l.Replicator.Attach
	cfg.Beside = l.Run
	cfg.RunGuard = l.Guard()
}

// DeviceInbox is the prefix of a device daemon's reply subjects: _INBOX.DEV.
func DeviceInbox(device string) string { return "_INBOX." + device }

// Guard is the daemon's run guard (control.DaemonConfig.RunGuard): a harness that was adopted
// by another device (the fleet's fence names it) does not run here. Offline, the device runs
// what it holds.
func (l *Link) Guard() func(ctx context.Context, e store.IndexEntry) error {
	return guard(l.nc, l.cfg.Device)
}

// Run answers requests and replicates the server's store until ctx ends; then, when the link
// is up, it sends what the daemon's shutdown wrote (a few seconds at most), and closes the
// connection.
func (l *Link) Run(ctx context.Context, srv *control.Server) {
	defer l.nc.Close()
	log := l.cfg.Log
	dir := srv.Store().Dir()
	resp, err := NewResponder(dir, l.cfg.Device, srv, log)
	if err != nil {
		log.Error("fleet: requests will not be answered", "err", err)
	} else {
		a := &adopter{nc: l.nc, device: l.cfg.Device, srv: srv}
		resp.adopt = a.adopt
		defer resp.Close()
		sub, err := resp.Subscribe(l.nc)
		if err != nil {
			log.Error("fleet: requests will not be answered", "err", err)
		} else {
			defer sub.Unsubscribe()
		}
	}
	ensured := false
	ensure := func(ctx context.Context) {
		if ensured || !l.nc.IsConnected() {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		js, _ := jetstream.New(l.nc)
		if err := EnsureStreams(ctx, js); err != nil {
			// A fleet on a NATS the operator runs may not let devices create streams: the
			// operator creates them (docs/fleet.md), and publishing says if they are missing.
			log.Warn("fleet: could not create the fleet's streams", "err", err)
		}
		ensured = true
	}
	l.Replicator.before = ensure
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watchFence(ctx, l.nc, l.cfg.Device, srv, log.Warn)
	}()
	defer func() { <-watched }()
	log.Info("fleet: replicating", "device", l.cfg.Device, "nats", l.cfg.NATS.URL)
	if err := l.Replicator.Run(ctx, srv.Store()); err != nil {
		log.Error("fleet: replication stopped", "err", err)
		return
	}
	if l.nc.IsConnected() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.Replicator.Sync(fctx, srv.Store()); err != nil {
			log.Warn("fleet: the last changes were not replicated before shutdown; the next daemon sends them", "err", err)
		}
	}
}
