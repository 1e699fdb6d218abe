package fleet_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
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

// A connected device that runs a harness whose fence entry moves to another device pauses it
// at once, saying which device owns it, and does not run it again.
func TestARunningHarnessWhoseFenceMovesIsPausedAtOnce(t *testing.T) {
	h := startHub(t, filepath.Join(t.TempDir(), "hub"), "127.0.0.1:0")
	_, js := client(t, h.URL())
	ctx := context.Background()
	a := startDevice(t, h.URL(), "a", storeIn(t, "a"))
	id := submit(t, a, taskYAML(t, "long", 200, "50ms", false))
	var entry store.IndexEntry
	waitFor(t, "a's harness running", 60*time.Second, func() (bool, string) {
		e, err := a.db().Index(id)
		entry = e
		return err == nil && e.Status == statefmt.StatusRunning && e.HeadSeq > 3, fmt.Sprint(e.Status, err)
	})
	kv, err := js.KeyValue(ctx, fleet.FenceBucket)
	if err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	if _, err := fleet.TakeFence(ctx, kv, entry, nil, fleet.Fence{Owner: "b", From: "a", Request: "r"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's harness paused", 10*time.Second, func() (bool, string) {
		st, err := a.db().Restore(id)
		if err != nil {
			return false, err.Error()
		}
		return st.Status == statefmt.StatusPaused, string(st.Status) + " " + st.StatusReason
	})
	t.Logf("paused %v after the fence moved", time.Since(moved).Round(time.Millisecond))
	st, err := a.db().Restore(id)
	if err != nil || !strings.Contains(st.StatusReason, "adopted by device b (request r") {
		t.Fatalf("a's harness: %+v, %v", st.StatusReason, err)
	}
	time.Sleep(500 * time.Millisecond)
	if now, err := a.db().Restore(id); err != nil || now.Status != statefmt.StatusPaused || now.CheckpointCount != st.CheckpointCount {
		t.Fatalf("a's harness went on after it was paused: %v, %v", now, err)
	}
}

// cutter forwards TCP connections to a NATS server until it cuts them (a network partition
// between a device and the hub), and again once it is mended.
type cutter struct {
	l     net.Listener
	to    string
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func newCutter(t *testing.T, to string) *cutter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{l: l, to: to}
	t.Cleanup(func() { l.Close(); c.setCut(true) })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			if c.cut {
				c.mu.Unlock()
				in.Close()
				continue
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				c.mu.Unlock()
				in.Close()
				continue
			}
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

func (c *cutter) url() string { return "nats://" + c.l.Addr().String() }

func (c *cutter) setCut(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for _, conn := range c.conns {
			conn.Close()
		}
		c.conns = nil
	}
}

// A device cut off from the hub runs on; when its link returns, a harness whose fence moved
// to another device meanwhile is paused.
func TestACutOffDevicePausesAHarnessAdoptedMeanwhileWhenItReconnects(t *testing.T) {
	h := startHub(t, filepath.Join(t.TempDir(), "hub"), "127.0.0.1:0")
	_, js := client(t, h.URL())
	ctx := context.Background()
	cut := newCutter(t, hostPort(t, h.URL()))
	a := startDevice(t, cut.url(), "a", storeIn(t, "a"))
	id := submit(t, a, taskYAML(t, "long", 400, "50ms", false))
	var entry store.IndexEntry
	waitFor(t, "a's harness running", 60*time.Second, func() (bool, string) {
		e, err := a.db().Index(id)
		entry = e
		return err == nil && e.Status == statefmt.StatusRunning && e.HeadSeq > 3, fmt.Sprint(e.Status, err)
	})
	cut.setCut(true)
	kv, err := js.KeyValue(ctx, fleet.FenceBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.TakeFence(ctx, kv, entry, nil, fleet.Fence{Owner: "b", From: "a", Request: "r"}); err != nil {
		t.Fatal(err)
	}
	cutAt, err := a.db().Index(id)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	now, err := a.db().Index(id)
	if err != nil || now.Status != statefmt.StatusRunning || now.HeadSeq <= cutAt.HeadSeq {
		t.Fatalf("cut off, a's harness did not run on: %s at %d, then %s at %d (%v)", cutAt.Status, cutAt.HeadSeq, now.Status, now.HeadSeq, err)
	}
	cut.setCut(false)
	waitFor(t, "a's harness paused once the link returned", 20*time.Second, func() (bool, string) {
		st, err := a.db().Restore(id)
		if err != nil {
			return false, err.Error()
		}
		return st.Status == statefmt.StatusPaused && strings.Contains(st.StatusReason, "adopted by device b"), string(st.Status) + " " + st.StatusReason
	})
}
