package fleet_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/store"
)

// The fence moves only by compare-and-set: a second create, and an update on a revision that
// is not the last, are refused and leave the entry as it was; harnesses of one id on two
// devices (two creation times) have two entries.
func TestTheFenceMovesOnlyFromTheRevisionItWasReadAt(t *testing.T) {
	h := startHub(t, filepath.Join(t.TempDir(), "hub"), "127.0.0.1:0")
	_, js := client(t, h.URL())
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, fleet.FenceBucket)
	if err != nil {
		t.Fatal(err)
	}
	e := store.IndexEntry{ID: "job.v2", CreatedAt: time.Unix(0, 1779000000123456789)}
	other := store.IndexEntry{ID: "job.v2", CreatedAt: e.CreatedAt.Add(time.Nanosecond)}
	if f, err := fleet.ReadFence(ctx, kv, e); f != nil || err != nil {
		t.Fatalf("a harness never adopted: %+v, %v", f, err)
	}
	rev, err := fleet.TakeFence(ctx, kv, e, nil, fleet.Fence{Owner: "b", From: "a", Request: "r1"})
	if err != nil || rev == 0 {
		t.Fatalf("first take: %d, %v", rev, err)
	}
	if _, err := fleet.TakeFence(ctx, kv, e, nil, fleet.Fence{Owner: "c", From: "a", Request: "r2"}); !errors.Is(err, fleet.ErrFenceMoved) {
		t.Fatalf("a second create: %v, want ErrFenceMoved", err)
	}
	first, err := fleet.ReadFence(ctx, kv, e)
	if err != nil || first.Owner != "b" || first.Revision != rev {
		t.Fatalf("after the refused create: %+v, %v", first, err)
	}
	rev2, err := fleet.TakeFence(ctx, kv, e, first, fleet.Fence{Owner: "c", From: "b", Request: "r3"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.TakeFence(ctx, kv, e, first, fleet.Fence{Owner: "d", From: "b", Request: "r4"}); !errors.Is(err, fleet.ErrFenceMoved) {
		t.Fatalf("an update from a stale revision: %v, want ErrFenceMoved", err)
	}
	if now, err := fleet.ReadFence(ctx, kv, e); err != nil || now.Owner != "c" || now.Revision != rev2 {
		t.Fatalf("after the refused update: %+v, %v", now, err)
	}
	if f, err := fleet.ReadFence(ctx, kv, other); f != nil || err != nil {
		t.Fatalf("another harness of the same id: %+v, %v", f, err)
	}
}
