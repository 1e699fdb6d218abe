package control

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/store"
)

// DaemonConfig configures the daemon.
type DaemonConfig struct {
	// Dir is the store directory the daemon owns.
	Dir string
	// HTTPAddr, when set, serves the HTTP API there too (bearer token in TokenName in Dir).
	// An address beyond loopback needs AllowRemote.
	HTTPAddr    string
	AllowRemote bool
	// MetricsPublic serves GET /metrics on HTTPAddr without the token.
	MetricsPublic bool
	// Concurrency is how many harnesses run at once: at least one.
	Concurrency int
	// Grace is how long a stopping daemon waits for its running harnesses to pause (0: not at all).
	Grace time.Duration
	// Options are the manager's: Dream Mode, the governor, event sinks. The daemon adds a sink
	// that logs every event to Logger.
	Options harness.Options
	Version string
	// Logger receives the daemon's log (default: none).
	Logger *slog.Logger
	// QuietEvents logs only the events that are warnings or failures (a warning, a failed step,
	// tool call or harness), not every event.
	QuietEvents bool
	// RoomPoll is how often the daemon checks whether a full disk has room again, to resume
	// the harnesses it paused (default 5 s).
	RoomPoll time.Duration
	// Retain, when set, is the retention: the daemon prunes the completed and failed
	// harnesses that last changed longer ago, on start and then periodically (see Retention).
	Retain time.Duration
	// Beside, when set, runs beside the scheduler once the daemon is up (fleet replication):
	// its context ends after the daemon has paused its harnesses, and the store is closed only
	// once it has returned.
	Beside func(ctx context.Context, srv *Server)
	// RunGuard is the server's (see Config.RunGuard).
	RunGuard func(ctx context.Context, e store.IndexEntry) error
	// Opened, when set, is called with the store once it is open, before the daemon serves or
	// runs anything: an event sink that reads the store when it hears of a checkpoint (the
	// fleet's replicator) has it from the first checkpoint on, not only once Beside runs.
	Opened func(db *store.Store)
}

// Validate checks what a caller may have got wrong: the HTTP address (CheckBind) and the
// concurrency.
func (cfg DaemonConfig) Validate() error {
	if cfg.HTTPAddr != "" {
		if err := CheckBind(cfg.HTTPAddr, cfg.AllowRemote); err != nil {
			return err
		}
	} else if cfg.MetricsPublic {
		return fmt.Errorf("--metrics-public serves metrics on the HTTP address: give --http too")
	}
	if cfg.Concurrency < 1 {
		return fmt.Errorf("--concurrency %d: run at least one harness at a time", cfg.Concurrency)
	}
	return nil
}

// Daemon owns a store: it serves the control socket (and the HTTP API), resumes what was
// interrupted, and runs queued harnesses until its context ends.
type Daemon struct {
	srv      *Server
	log      *slog.Logger
	httpAddr net.Addr
	resumed  []string
	served   chan error
	servers  int
	stopped  chan struct{}
}

// RunDaemon runs the daemon until ctx ends, then stops it gracefully (see StartDaemon). Its
// error is one that kept the daemon from starting.
func RunDaemon(ctx context.Context, cfg DaemonConfig) error {
	d, err := StartDaemon(ctx, cfg)
	if err != nil {
		return err
	}
	d.Wait()
	return nil
}

// StartDaemon opens the store in cfg.Dir to own it (a store another process owns is refused
// with an *OwnedError), listens on its control socket and on cfg.HTTPAddr, queues the
// harnesses to recover (Server.Recover) and starts running them. When ctx ends the daemon
// stops: it pauses its running harnesses with reason harness.ReasonShutdown (the next daemon
// resumes them), waits for them up to cfg.Grace, stops serving and closes the store.
func StartDaemon(ctx context.Context, cfg DaemonConfig) (d *Daemon, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := openToOwn(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if cfg.Opened != nil {
		cfg.Opened(db)
	}
	o := cfg.Options
	live := &liveCounters{}
	o.Sinks = append(slices.Clone(o.Sinks), event.Slog{L: log, Quiet: cfg.QuietEvents}, live)
	srv := NewServer(db, Config{Owner: OwnerDaemon, Concurrency: cfg.Concurrency, Options: o, Version: cfg.Version, Logger: log, RoomPoll: cfg.RoomPoll, RunGuard: cfg.RunGuard})
	d = &Daemon{srv: srv, log: log, served: make(chan error, 2), stopped: make(chan struct{})}
	// The listeners serve until ctx ends, or until a failure below stops them. A failure
	// returns a nil d: the cleanup keeps its own reference.
	ctx, cancel := context.WithCancel(ctx)
	started := d
	defer func() {
		if err != nil {
			cancel()
			started.waitServers()
			db.Close()
		}
	}()
	sock, err := ListenSocket(cfg.Dir)
	if err != nil {
		return nil, err
	}
	d.serve(ctx, sock, withMetrics(Handler(srv, ""), srv, live, "", true), SocketLimits)
	if cfg.HTTPAddr != "" {
		tok, err := Token(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("HTTP API token: %w", err)
		}
		l, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("--http %s: %w", cfg.HTTPAddr, err)
		}
		d.httpAddr = l.Addr()
		d.serve(ctx, l, webHandler(srv, tok, live, cfg.MetricsPublic), HTTPLimits)
		log.Info("HTTP API listening", "addr", l.Addr().String(), "token", filepath.Join(cfg.Dir, TokenName))
	}
	if d.resumed, err = srv.Recover(); err != nil {
		return nil, err
	}
	h, _ := srv.Health(ctx)
	log.Info("daemon started", "store", cfg.Dir, "pid", os.Getpid(), "concurrency", cfg.Concurrency, "dream", cfg.Options.Dream,
		"resumed", strings.Join(d.resumed, ","), "frozen", h.Frozen)
	retention := srv.Retention(ctx, cfg.Retain)
	besideCtx, stopBeside := context.WithCancel(context.Background())
	besideDone := make(chan struct{})
	if cfg.Beside != nil {
		go func() {
			defer close(besideDone)
			cfg.Beside(besideCtx, srv)
		}()
	} else {
		close(besideDone)
	}
	go func() {
		defer close(d.stopped)
		srv.Schedule(ctx, cfg.Grace)
		cancel()
		retention()
		d.waitServers()
		stopBeside()
		<-besideDone
		if err := db.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
		log.Info("daemon stopped")
	}()
	return d, nil
}

func (d *Daemon) serve(ctx context.Context, l net.Listener, h http.Handler, lim Limits) {
	d.servers++
	go func() { d.served <- Serve(ctx, l, h, lim) }()
}

// waitServers waits for the listeners to stop, logging how they failed.
func (d *Daemon) waitServers() {
	for range d.servers {
		if err := <-d.served; err != nil {
			d.log.Error("control server", "err", err)
		}
	}
	d.servers = 0
}

// Server is the daemon's server.
func (d *Daemon) Server() *Server { return d.srv }

// HTTPAddr is the address the HTTP API listens on (nil without one).
func (d *Daemon) HTTPAddr() net.Addr { return d.httpAddr }

// Resumed are the harnesses the daemon queued on start, oldest first.
func (d *Daemon) Resumed() []string { return d.resumed }

// Wait waits until the daemon has stopped (its context ended) and the store is closed. What
// failed on the way (a listener, closing the store) is logged.
func (d *Daemon) Wait() { <-d.stopped }
