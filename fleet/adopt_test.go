package fleet_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// An adoption refuses a harness the fence gives to a third device, changing nothing; one that
// stopped after taking the fence (the fence names the target with the request's id) finishes
// when the same request comes again, and answers the gate the harness waits on.
func TestAnAdoptionStoppedAfterTakingTheFenceFinishesWhenSentAgain(t *testing.T) {
	h := startHub(t, filepath.Join(t.TempDir(), "hub"), "127.0.0.1:0")
	nc, js := client(t, h.URL())
	ctx := context.Background()
	a := startDevice(t, h.URL(), "a", storeIn(t, "a"))
	id := submit(t, a, taskYAML(t, "gated", 3, "", true))
	waitFor(t, "a's harness at its gate, on the hub", 60*time.Second, func() (bool, string) {
		if ok, why := settled(a); !ok {
			return false, why
		}
		return caughtUp(js, a)
	})
	a.stop()
	b := startDevice(t, h.URL(), "b", storeIn(t, "b"))
	s, err := fleet.Show(ctx, js, nil, "a", id)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, fleet.FenceBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.TakeFence(ctx, kv, s.Entry, nil, fleet.Fence{Owner: "c", From: "a", Request: "earlier"}); err != nil {
		t.Fatal(err)
	}
	_, err = fleet.Decide(ctx, nc, "b", fleet.Request{ID: "r1", Op: fleet.OpAdopt, From: "a", Harness: id}, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "was adopted by device c (request earlier") {
		t.Fatalf("adopting a harness the fence gives to c: %v", err)
	}
	if _, err := b.db().Index(id); err == nil {
		t.Fatal("the refused adoption stored the harness on b")
	}
	// As if b's daemon had stopped right after taking the fence for request r2.
	f, err := fleet.ReadFence(ctx, kv, s.Entry)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := fleet.TakeFence(ctx, kv, s.Entry, f, fleet.Fence{Owner: "b", From: "a", Request: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := fleet.Decide(ctx, nc, "b", fleet.Request{ID: "r2", Op: fleet.OpAdopt, From: "a", Harness: id}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a := rep.Adopted; a == nil || a.FenceRevision != rev || a.Resumed || len(a.Waiting) != 1 || a.HeadSeq != s.Entry.HeadSeq {
		t.Fatalf("the adoption sent again: %+v", rep.Adopted)
	}
	got, err := b.db().Restore(id)
	if err != nil || got.Status != statefmt.StatusPaused || got.CheckpointCount != s.State.CheckpointCount {
		t.Fatalf("b's harness: %v, %v", got, err)
	}
	if f, _ := fleet.ReadFence(ctx, kv, s.Entry); f.Revision != rev {
		t.Fatalf("the fence moved again: %+v", f)
	}
}

// A device that cannot reach NATS runs what it holds, even a harness the fence gives to
// another device: a step never waits on the network.
func TestADeviceOfflineRunsWhatItHoldsWhateverTheFence(t *testing.T) {
	h := startHub(t, filepath.Join(t.TempDir(), "hub"), "127.0.0.1:0")
	_, js := client(t, h.URL())
	ctx := context.Background()
	dir := storeIn(t, "a")
	a := startDevice(t, h.URL(), "a", dir)
	id := submit(t, a, taskYAML(t, "long", 40, "50ms", false))
	waitFor(t, "a's harness on the hub", 60*time.Second, func() (bool, string) {
		_, err := fleet.Show(ctx, js, nil, "a", id)
		return err == nil, ""
	})
	a.stop() // pauses it for the next daemon
	e, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := e.Index(id)
	e.Close()
	if err != nil || entry.Status != statefmt.StatusPaused {
		t.Fatalf("a's harness after its daemon stopped: %+v, %v", entry, err)
	}
	kv, err := js.KeyValue(ctx, fleet.FenceBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.TakeFence(ctx, kv, entry, nil, fleet.Fence{Owner: "b", From: "a", Request: "r"}); err != nil {
		t.Fatal(err)
	}
	u := h.URL()
	h.Shutdown()
	a = startDevice(t, u, "a", dir)
	waitFor(t, "a's harness completed offline", 60*time.Second, func() (bool, string) {
		e, err := a.db().Index(id)
		if err != nil {
			return false, err.Error()
		}
		return e.Status == statefmt.StatusCompleted, string(e.Status)
	})
}
