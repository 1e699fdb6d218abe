package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/store"
)

// FenceBucket is the JetStream key-value bucket that says which device owns a harness that
// was adopted: one entry per harness, changed only by compare-and-set on its revision.
const FenceBucket = "HE_FLEET_FENCE"

// FenceConfig is the fence bucket's configuration.
func FenceConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      FenceBucket,
		Description: "harness-edge fleet: the device that owns each adopted harness",
		History:     16,
		Storage:     jetstream.FileStorage,
	}
}

// Fence is one entry of the fence bucket: who owns the harness, since which request.
type Fence struct {
	Owner   string    `json:"owner"`
	From    string    `json:"from"`
	Request string    `json:"request"`
	At      time.Time `json:"at"`
	// Revision is the entry's revision in the bucket (not stored in the value).
	Revision uint64 `json:"-"`
}

// FenceKey is the key of a harness's entry: its creation time (Unix nanoseconds, base 36),
// which an adopted harness keeps, and its id ('.' written '='). Two devices' harnesses of the
// same id are two entries; a harness and its adopted copy are one.
func FenceKey(e store.IndexEntry) string {
	return strconv.FormatInt(e.CreatedAt.UnixNano(), 36) + "." + strings.ReplaceAll(e.ID, ".", "=")
}

// ReadFence reads a harness's entry; a harness never adopted has none (nil, nil).
func ReadFence(ctx context.Context, kv jetstream.KeyValue, e store.IndexEntry) (*Fence, error) {
	ent, err := kv.Get(ctx, FenceKey(e))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the fence of harness %s: %w", e.ID, err)
	}
	var f Fence
	if err := json.Unmarshal(ent.Value(), &f); err != nil || f.Owner == "" {
		return nil, fmt.Errorf("the fence of harness %s (revision %d) is not valid: %q", e.ID, ent.Revision(), ent.Value())
	}
	f.Revision = ent.Revision()
	return &f, nil
}

// ErrFenceMoved is returned by TakeFence when the entry changed since it was read.
var ErrFenceMoved = errors.New("the fence moved meanwhile")

// TakeFence makes f's owner the owner of the harness: a create when the entry was read absent
// (prev nil), else an update on prev's revision. Another writer in between makes it fail
// with ErrFenceMoved, and the entry stays as the other left it.
func TakeFence(ctx context.Context, kv jetstream.KeyValue, e store.IndexEntry, prev *Fence, f Fence) (uint64, error) {
	val, err := json.Marshal(f)
	if err != nil {
		return 0, err
	}
	var rev uint64
	if prev == nil {
		rev, err = kv.Create(ctx, FenceKey(e), val)
	} else {
		rev, err = kv.Update(ctx, FenceKey(e), val, prev.Revision)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("%w: %w", ErrFenceMoved, err)
	}
	return rev, err
}

// HandedOverError is what a device's guard answers for a harness another device owns.
type HandedOverError struct {
	Fence Fence
}

func (e *HandedOverError) Error() string {
	return fmt.Sprintf("adopted by device %s (request %s, %s): it runs there, not here", e.Fence.Owner, e.Fence.Request, e.Fence.At.Format(time.RFC3339))
}

// Is lets errors.Is match control.ErrHandedOver.
func (e *HandedOverError) Is(target error) bool { return target == control.ErrHandedOver }

// guard is a device's control.Config.RunGuard: a harness whose fence names another device is
// not run here. Offline (no connection to NATS), or when the fence cannot be read in time, the
// device runs what it holds.
func guard(nc *nats.Conn, device string) func(ctx context.Context, e store.IndexEntry) error {
	return func(ctx context.Context, e store.IndexEntry) error {
		if !nc.IsConnected() {
			return nil
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		kv, err := js.KeyValue(ctx, FenceBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil // nothing was ever adopted
		}
		if err != nil {
			return err
		}
		f, err := ReadFence(ctx, kv, e)
		if err != nil || f == nil || f.Owner == device {
			return err
		}
		return &HandedOverError{Fence: *f}
	}
}

// parseFenceKey reverses FenceKey: the harness's generation (base 36) and id.
func parseFenceKey(key string) (gen, id string, ok bool) {
	gen, rest, ok := strings.Cut(key, ".")
	if !ok {
		return "", "", false
	}
	return gen, strings.ReplaceAll(rest, "=", "."), true
}

// watchFence hands over, while the device is connected, every harness it runs whose fence
// entry names another device: the entries there are when the watch starts (after a
// reconnection too) and every change after. Without a connection it waits; it never holds up
// a step.
func watchFence(ctx context.Context, nc *nats.Conn, device string, srv *control.Server, log func(msg string, args ...any)) {
	for ctx.Err() == nil {
		if nc.IsConnected() {
			if err := watchFenceOnce(ctx, nc, device, srv); err != nil && ctx.Err() == nil {
				log("fleet: watching the fence", "err", err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func watchFenceOnce(ctx context.Context, nc *nats.Conn, device string, srv *control.Server) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, FenceBucket)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer w.Stop()
	status := nc.StatusChanged(nats.DISCONNECTED, nats.CLOSED)
	defer nc.RemoveStatusListener(status)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-status:
			return nil // watched again once connected: the entries come again
		case ent, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if ent == nil || ent.Operation() != jetstream.KeyValuePut {
				continue
			}
			var f Fence
			if json.Unmarshal(ent.Value(), &f) != nil || f.Owner == "" || f.Owner == device {
				continue
			}
			gen, id, ok := parseFenceKey(ent.Key())
			if !ok {
				continue
			}
			e, err := srv.Store().Index(id)
			if err != nil || strconv.FormatInt(e.CreatedAt.UnixNano(), 36) != gen {
				continue
			}
			f.Revision = ent.Revision()
			srv.HandOver(id, (&HandedOverError{Fence: f}).Error())
		}
	}
}
