package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// Reading the fleet (show, events, report, an adoption's read) leaves no consumer on the hub.
// A NATS server allows 1,000 consumers per stream by default, and an ordered consumer left
// behind lives on for five minutes: a `fleet report` of a fleet of more than 1,000 harnesses
// (one consumer each) used to fill the stream, listing every harness past the thousandth as
// damaged, and for five minutes after every `fleet show`, `fleet events` and adoption was
// refused ("maximum consumers limit reached").
func TestReadingTheFleetLeavesNoConsumerBehind(t *testing.T) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	_, js := client(t, hub.URL())
	dv := startDevice(t, hub.URL(), "pi1", storeIn(t, "store"))
	submit(t, dv, taskYAML(t, "job", 3, "", false))
	waitFor(t, "pi1 settles", 60*time.Second, func() (bool, string) { return settled(dv) })
	waitFor(t, "the fleet catches up", 30*time.Second, func() (bool, string) { return caughtUp(js, dv) })
	ctx := context.Background()
	// The client replaces an ordered consumer at each fetch and deletes the one before in the
	// background: those go within moments; the one a reader ends with stayed five minutes.
	consumers := func(what string) {
		t.Helper()
		s, err := js.Stream(ctx, fleet.StreamLog)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Consumers == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s left %d consumers on the stream %s", what, info.State.Consumers, fleet.StreamLog)
			}
		}
	}
	if _, err := fleet.Show(ctx, js, nil, "pi1", "job"); err != nil {
		t.Fatal(err)
	}
	consumers("fleet show")
	n := 0
	if err := fleet.Events(ctx, js, "pi1", "job", false, func(event.Event) error { n++; return nil }); err != nil || n == 0 {
		t.Fatalf("fleet events: %d events, %v", n, err)
	}
	consumers("fleet events")
	if _, err := fleet.BuildReport(ctx, js, nil, 0); err != nil {
		t.Fatal(err)
	}
	consumers("fleet report")
	if _, err := fleet.ReadReplicated(ctx, js, "pi1", "job"); err != nil {
		t.Fatal(err)
	}
	consumers("reading a harness to adopt it")
}
