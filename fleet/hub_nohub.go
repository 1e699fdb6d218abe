//go:build nohub

package fleet

import "errors"

// A binary built with the tag nohub leaves the embedded nats-server out (9.6 MB): such a
// device joins a hub or a NATS cluster that runs elsewhere.

// HubConfig configures a hub.
type HubConfig struct {
	Dir         string
	Listen      string
	AllowRemote bool
	MaxPayload  int32
	Logs        bool
}

// DefaultListen is where a hub listens unless told otherwise.
const DefaultListen = "127.0.0.1:4222"

// Hub is not in this binary.
type Hub struct{}

// ErrNoHub says the binary was built without the hub.
var ErrNoHub = errors.New("this binary was built without the embedded hub (build tag nohub, as `make build` builds devices' binaries): run `harness-edge hub` from `make build-hub` (bin/harness-edge-hub), or any nats-server with JetStream (docs/fleet.md)")

// StartHub refuses: the binary has no hub.
func StartHub(HubConfig) (*Hub, error) { return nil, ErrNoHub }

// URL is empty: there is no hub.
func (h *Hub) URL() string { return "" }

// Shutdown does nothing: there is no hub.
func (h *Hub) Shutdown() {}
