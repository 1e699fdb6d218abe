//go:build !nohub

package fleet

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/store/trust"
)

// HubConfig configures a hub.
type HubConfig struct {
	// Dir holds JetStream's files (in Dir/jetstream).
	Dir string
	// Listen is host:port for NATS clients (port 0: any free port). An address beyond
	// loopback needs AllowRemote.
	Listen      string
	AllowRemote bool
	// MaxPayload is the largest message the hub takes (default 8 MiB: a keyframe of a big
	// state is one message).
	MaxPayload int32
	// Logs, when set, makes the server log (notices and errors) through its own logger.
	Logs bool
}

// DefaultListen is where a hub listens unless told otherwise.
const DefaultListen = "127.0.0.1:4222"

// Hub is an embedded nats-server with JetStream on disk and the fleet's streams.
type Hub struct {
	s *server.Server
}

// StartHub starts a hub and creates the fleet's streams.
func StartHub(cfg HubConfig) (*Hub, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if err := control.CheckBind(cfg.Listen, cfg.AllowRemote); err != nil {
		return nil, err
	}
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("--listen %s: the port is not a number from 0 to 65535", cfg.Listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if err := trust.PrepareDir(cfg.Dir); err != nil {
		return nil, err
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = 8 << 20
	}
	opts := &server.Options{
		ServerName: "harness-edge-hub",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.Dir, "jetstream"),
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true,
		NoLog:      !cfg.Logs,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	if cfg.Logs {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("hub: the NATS server did not start listening on %s", cfg.Listen)
	}
	h := &Hub{s: s}
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		h.Shutdown()
		return nil, fmt.Errorf("hub: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err = EnsureStreams(ctx, js)
		cancel()
	}
	if err != nil {
		h.Shutdown()
		return nil, fmt.Errorf("hub: %w", err)
	}
	return h, nil
}

// URL is the address NATS clients connect to.
func (h *Hub) URL() string { return h.s.ClientURL() }

// Shutdown stops the hub and waits until it has.
func (h *Hub) Shutdown() {
	h.s.Shutdown()
	h.s.WaitForShutdown()
}
