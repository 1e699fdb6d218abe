package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

func TestEveryHarnessOfEveryDeviceAppearsInTheFleetAsTheDeviceShowsIt(t *testing.T) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	_, js := client(t, hub.URL())
	var devs []*device
	for i := range 3 {
		dv := startDevice(t, hub.URL(), fmt.Sprintf("board%d", i+1), storeIn(t, "store"))
		submit(t, dv, taskYAML(t, "plain", 3, "10ms", false))
		submit(t, dv, taskYAML(t, "gated", 2, "10ms", true))
		devs = append(devs, dv)
	}
	for _, dv := range devs {
		waitFor(t, dv.name+" settles", 60*time.Second, func() (bool, string) { return settled(dv) })
	}
	waitFor(t, "the fleet catches up", 30*time.Second, func() (bool, string) { return caughtUp(js, devs...) })
	for _, dv := range devs {
		checkReplica(t, js, dv)
	}
	f, err := fleet.List(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Devices) != 3 || len(f.Harnesses) != 6 {
		t.Fatalf("fleet ls: %d devices, %d harnesses; want 3 and 6: %+v", len(f.Devices), len(f.Harnesses), f)
	}
	for _, h := range f.Harnesses {
		want := statefmt.StatusCompleted
		if h.Entry.ID == "gated" {
			want = statefmt.StatusPaused
		}
		if h.Entry.Status != want || h.Lag < 0 || h.Lag > 30*time.Second {
			t.Fatalf("%s/%s: status %s (want %s), lag %s", h.Device, h.Entry.ID, h.Entry.Status, want, h.Lag)
		}
	}
	for _, d := range f.Devices {
		if d.Heartbeat.Harnesses != 2 || d.Heartbeat.Backlog != 0 {
			t.Fatalf("device %s: heartbeat %+v", d.Name, d.Heartbeat)
		}
	}
}

func TestRecordsThatDoNotVerifyDoNotRebuild(t *testing.T) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	_, js := client(t, hub.URL())
	dv := startDevice(t, hub.URL(), "board", storeIn(t, "store"))
	id := submit(t, dv, taskYAML(t, "plain", 3, "5ms", false))
	waitFor(t, "settles", 30*time.Second, func() (bool, string) { return settled(dv) })
	waitFor(t, "caught up", 30*time.Second, func() (bool, string) { return caughtUp(js, dv) })
	recs, err := fleet.Records(context.Background(), js, "board", id)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := dv.db().Index(id)
	if err != nil {
		t.Fatal(err)
	}
	chain := func() [][]byte {
		var c [][]byte
		for _, r := range recs {
			if r.Seq >= idx.KeyframeSeq {
				c = append(c, slices.Clone(r.Envelope))
			}
		}
		return c
	}
	if _, err := store.Rebuild(nil, idx, chain()); err != nil {
		t.Fatalf("the replicated records do not rebuild: %v", err)
	}
	for i := range len(chain()) {
		c := chain()
		c[i][len(c[i])-1] ^= 0x40
		if _, err := store.Rebuild(nil, idx, c); err == nil {
			t.Fatalf("a record with a flipped bit (record %d of %d) rebuilt", i+1, len(c))
		}
		c = chain()
		c = slices.Delete(c, i, i+1)
		if _, err := store.Rebuild(nil, idx, c); err == nil {
			t.Fatalf("a chain without its record %d of %d rebuilt", i+1, len(chain()))
		}
	}
}

func TestDevicesRunOfflineAndTheBacklogDrainsInOrderWithNothingLostOrTwice(t *testing.T) {
	hubDir := t.TempDir()
	hub := startHub(t, hubDir, "127.0.0.1:0")
	u := hub.URL()
	var devs []*device
	for i := range 2 {
		dv := startDevice(t, u, fmt.Sprintf("edge%d", i+1), storeIn(t, "store"))
		submit(t, dv, taskYAML(t, "long", 24, "60ms", false))
		submit(t, dv, taskYAML(t, "short", 6, "30ms", false))
		devs = append(devs, dv)
	}
	// Some of it reaches the hub; then the hub goes away while the harnesses run.
	_, js := client(t, u)
	waitFor(t, "first records replicated", 30*time.Second, func() (bool, string) {
		recs, err := fleet.Records(context.Background(), js, "edge1", "long")
		return err == nil && len(recs) >= 3, fmt.Sprint(len(recs), err)
	})
	hub.Shutdown()
	before := map[string]uint64{}
	for _, dv := range devs {
		e, err := dv.db().Index("long")
		if err != nil {
			t.Fatal(err)
		}
		before[dv.name] = e.HeadSeq
	}
	// The devices go on without it: every harness finishes, and the replicators know they are
	// offline with a backlog.
	for _, dv := range devs {
		waitFor(t, dv.name+" finishes offline", 60*time.Second, func() (bool, string) { return settled(dv) })
		e, _ := dv.db().Index("long")
		if e.Status != statefmt.StatusCompleted || e.HeadSeq <= before[dv.name] {
			t.Fatalf("%s/long did not go on while the hub was down: %s, head %d (was %d)", dv.name, e.Status, e.HeadSeq, before[dv.name])
		}
		waitFor(t, dv.name+" sees it is offline", 10*time.Second, func() (bool, string) {
			s := dv.link.Replicator.Stats()
			return !s.Online && s.Backlog > 0, fmt.Sprintf("%+v", s)
		})
	}
	// The hub comes back on the same address with the same files: the backlog drains.
	hub2 := startHub(t, hubDir, hostPort(t, u))
	_, js2 := client(t, hub2.URL())
	waitFor(t, "the backlog drains", 60*time.Second, func() (bool, string) { return caughtUp(js2, devs...) })
	total := 0
	for _, dv := range devs {
		total += checkReplica(t, js2, dv)
		s := dv.link.Replicator.Stats()
		if !s.Online || s.Backlog != 0 || s.Released != 0 {
			t.Fatalf("%s after the drain: %+v", dv.name, s)
		}
	}
	t.Logf("%d records replicated, checked record by record", total)
}

// A device that lost its cursor (restored from an old backup, say, or restarted with a cursor
// behind what JetStream acknowledged: it is written every CursorSync) sends again what its store
// holds, and JetStream drops the copies. A keyframe has released the records before it since:
// the hub holds them, so none is counted released.
func TestACursorLostAfterSendingSendsAgainButJetStreamStoresEachMessageOnce(t *testing.T) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	_, js := client(t, hub.URL())
	dir := storeIn(t, "store")
	dv := startDevice(t, hub.URL(), "solo", dir)
	id := submit(t, dv, taskYAML(t, "long", 1100, "", false))
	waitFor(t, "settles", 30*time.Second, func() (bool, string) { return settled(dv) })
	waitFor(t, "caught up", 30*time.Second, func() (bool, string) { return caughtUp(js, dv) })
	keyframe := firstStored(t, dv, id)
	dv.stop()
	if err := removeCursor(dir); err != nil {
		t.Fatal(err)
	}
	dv2 := startDevice(t, hub.URL(), "solo", dir)
	waitFor(t, "sent again", 30*time.Second, func() (bool, string) {
		s := dv2.link.Replicator.Stats()
		return s.Duplicates > 0 && s.Backlog == 0 && s.Online, fmt.Sprintf("%+v", s)
	})
	if s := dv2.link.Replicator.Stats(); s.Released != 0 {
		t.Fatalf("%d records counted released, though the hub holds all %d before keyframe %d: %+v", s.Released, keyframe-1, keyframe, s)
	}
	checkReplica(t, js, dv2)
}

// Records a keyframe released before they were sent, and whose copies went with a daemon that
// stopped while the hub was down, never reach the hub: they are counted released, exactly.
func TestRecordsTheHubNeverGotAreCountedReleasedExactly(t *testing.T) {
	hubDir := t.TempDir()
	hub := startHub(t, hubDir, "127.0.0.1:0")
	u := hub.URL()
	hub.Shutdown()
	dir := storeIn(t, "store")
	dv := startDevice(t, u, "offline", dir)
	id := submit(t, dv, taskYAML(t, "long", 1100, "", false))
	waitFor(t, "settles offline", 30*time.Second, func() (bool, string) { return settled(dv) })
	keyframe := firstStored(t, dv, id)
	dv.stop() // the copies it held for the hub are gone with it
	hub2 := startHub(t, hubDir, hostPort(t, u))
	_, js := client(t, hub2.URL())
	dv2 := startDevice(t, hub2.URL(), "offline", dir)
	waitFor(t, "the backlog drains", 30*time.Second, func() (bool, string) {
		s := dv2.link.Replicator.Stats()
		return s.Backlog == 0 && s.Online && s.Records > 0, fmt.Sprintf("%+v", s)
	})
	if s := dv2.link.Replicator.Stats(); s.Released != keyframe-1 {
		t.Fatalf("%d records counted released; the hub never got the %d before keyframe %d: %+v", s.Released, keyframe-1, keyframe, s)
	}
	recs, err := fleet.Records(context.Background(), js, "offline", id)
	if err != nil || len(recs) == 0 || recs[0].Seq != keyframe {
		t.Fatalf("the hub's first record of %s: %v (want keyframe %d)", id, err, keyframe)
	}
}

// firstStored is the first record the device's store still holds of harness id: its newest
// keyframe, after which the test needs one that released records.
func firstStored(t *testing.T, dv *device, id string) uint64 {
	t.Helper()
	var first uint64
	err := dv.db().StoredRecords(id, 0, func(seq uint64, _ []byte) error {
		first = seq
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	if first <= 1 {
		t.Fatalf("%s/%s holds record %d first: no keyframe released earlier records, and the test needs one", dv.name, id, first)
	}
	return first
}

var errStop = errors.New("stop")

func TestFleetApproveIsAppliedOnceAlsoWhenTheRequestIsRetried(t *testing.T) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	nc, js := client(t, hub.URL())
	dir := storeIn(t, "store")
	dv := startDevice(t, hub.URL(), "board", dir)
	id := submit(t, dv, taskYAML(t, "gated", 2, "5ms", true))
	waitFor(t, "waits for a human", 30*time.Second, func() (bool, string) { return settled(dv) })
	ctx := context.Background()
	req := fleet.Request{ID: "req-1", Harness: id, Gate: "g1", Approve: true}

	// Two copies of the request at once, then one more: one decision.
	var wg sync.WaitGroup
	replies := make([]fleet.Reply, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], errs[i] = fleet.Decide(ctx, nc, "board", req, 2*time.Second)
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("request copy %d: %v", i, errs[i])
		}
	}
	if replies[0].Repeated == replies[1].Repeated {
		t.Fatalf("exactly one copy should have been applied: %+v", replies)
	}
	for _, r := range replies {
		if r.Decision == nil || r.Decision.Gate.ID != "g1" || r.Decision.Gate.Status != statefmt.GateApproved || r.Decision.HarnessID != id {
			t.Fatalf("reply: %+v", r)
		}
	}
	waitFor(t, "the harness goes on and completes", 30*time.Second, func() (bool, string) {
		e, err := dv.db().Index(id)
		return err == nil && e.Status == statefmt.StatusCompleted, fmt.Sprint(e.Status, err)
	})

	// The device restarts; the same request again gets the first answer, and changes nothing.
	dv.stop()
	dv = startDevice(t, hub.URL(), "board", dir)
	again, err := fleet.Decide(ctx, nc, "board", req, 2*time.Second)
	if err != nil || !again.Repeated || again.Decision == nil || again.Decision.Gate.ID != "g1" {
		t.Fatalf("the request after a restart: %+v %v", again, err)
	}
	approvals := 0
	err = dv.db().Events(id, 0, func(e event.Event) bool {
		if e.Type == event.Gate && e.Action == "approved" {
			approvals++
		}
		return true
	})
	if err != nil || approvals != 1 {
		t.Fatalf("the event log has %d gate approvals (%v), want 1", approvals, err)
	}
	waitFor(t, "the fleet shows it completed", 30*time.Second, func() (bool, string) { return caughtUp(js, dv) })

	// A new request for a gate no longer pending is refused, and says why.
	_, err = fleet.Decide(ctx, nc, "board", fleet.Request{ID: "req-2", Harness: id, Gate: "g1", Approve: true}, 2*time.Second)
	var de *fleet.DeviceError
	if !errors.As(err, &de) || de.Kind != fleet.KindRefused || !strings.Contains(err.Error(), "no pending gate g1") {
		t.Fatalf("approving a decided gate: %v", err)
	}
	_, err = fleet.Decide(ctx, nc, "board", fleet.Request{ID: "req-3", Harness: "missing", Approve: true}, 2*time.Second)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("approving a gate of a harness the device does not hold: %v", err)
	}
	// A device that is not there: a clear error once the time is up.
	tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = fleet.Decide(tctx, nc, "elsewhere", req, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "device elsewhere does not answer") {
		t.Fatalf("a request to a device that is not connected: %v", err)
	}
}

// decider counts the decisions a Responder applies.
type decider struct{ n int }

func (d *decider) Decide(_ context.Context, id, gate string, approve bool, reason string) (control.Decision, error) {
	d.n++
	return control.Decision{HarnessID: id, Gate: statefmt.Gate{ID: gate}}, nil
}

func TestBadRequestsAreRefusedAndChangeNothing(t *testing.T) {
	dir := t.TempDir()
	dec := &decider{}
	r, err := fleet.NewResponder(dir, "board", dec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct{ body, want string }{
		{`not json`, "request is not valid JSON"},
		{`{"id":"a","harness":"h","approve":true,"extra":1}`, `unknown field "extra"`},
		{`{"harness":"h","approve":true}`, "request has no id"},
		{`{"id":"a","harness":"h","approve":false}`, "a rejection needs a reason"},
		{`{"id":"a","harness":"../h","approve":true}`, `harness id "../h" is not valid`},
		{`{"id":"` + strings.Repeat("x", 129) + `","harness":"h","approve":true}`, "request has no id (1-128 characters)"},
		{strings.Repeat(" ", 500<<10), "more than"},
		{`{"id":"a","op":"move","harness":"h"}`, `request op "move" is not one this device knows`},
		{`{"id":"a","op":"adopt","from":"board","harness":"h"}`, "harness h is on this device (board) already"},
		{`{"id":"a","op":"adopt","from":"no good","harness":"h"}`, `adoption: device name "no good" is not valid`},
		{`{"id":"a","op":"adopt","harness":"h"}`, `adoption: device name "" is not valid`},
		{`{"op":"adopt","from":"pi","harness":"h"}`, "request has no id"},
		{"{\"id\":\"a\",\"harness\":\"h\",\"approve\":false,\"reason\":\"caf\xe9\"}", "not UTF-8: the byte 0xE9 at byte offset 53"},
		{`{"id":"a","harness":"h","approve":false,"reason":"caf\ud800"}`, `not UTF-8: the escape \ud800 at byte offset 53 is half of a UTF-16 surrogate pair`},
	} {
		rep := r.Handle(context.Background(), []byte(c.body))
		if rep.Kind != fleet.KindBadInput || !strings.Contains(rep.Error, c.want) || rep.Decision != nil {
			t.Errorf("%.40q: %+v, want a bad_input error with %q", c.body, rep, c.want)
		}
	}
	if dec.n != 0 {
		t.Fatalf("bad requests reached the decider %d times", dec.n)
	}
	// A responder without an adopter refuses adoptions; a ping is answered and applies nothing.
	if rep := r.Handle(context.Background(), []byte(`{"id":"a","op":"adopt","from":"pi","harness":"h"}`)); rep.Kind != fleet.KindRefused || rep.Adopted != nil {
		t.Fatalf("adoption without an adopter: %+v", rep)
	}
	if rep := r.Handle(context.Background(), []byte(`{"op":"ping"}`)); rep.Error != "" || rep.Decision != nil || dec.n != 0 {
		t.Fatalf("ping: %+v, %d decisions", rep, dec.n)
	}
	// A reason as long as a human's reason may be reaches the device whatever JSON makes of it.
	long, _ := json.Marshal(fleet.Request{ID: "long", Harness: "h", Reason: strings.Repeat("\"\x01", control.MaxReason/2)})
	if rep := r.Handle(context.Background(), long); rep.Error != "" || dec.n != 1 {
		t.Fatalf("a %d-byte request with a reason at its limit: %+v, %d decisions", len(long), rep, dec.n)
	}
	props := proptest.Props(t, 200)
	props.Property("any bytes get an answer, never a panic, and apply nothing unless well formed", prop.ForAll(func(b []byte) bool {
		return proptest.Report(t, func() string {
			n := dec.n
			rep := r.Handle(context.Background(), b)
			if rep.Error == "" && dec.n != n+1 {
				return fmt.Sprintf("%q: answered without error but applied %d", b, dec.n-n)
			}
			if rep.Error != "" && dec.n != n {
				return fmt.Sprintf("%q: refused (%s) but applied", b, rep.Error)
			}
			return ""
		})
	}, gen.SliceOf(gen.UInt8())))
	props.TestingRun(t)
}

func TestReplicatedSubjectsKeepHarnessIDsWithDots(t *testing.T) {
	for _, c := range []struct{ dev, kind, id, want string }{
		{"board1", "rec", "demo.draft", "he.fleet.board1.rec.demo~draft"},
		{"b-2", "idx", "a_b-c", "he.fleet.b-2.idx.a_b-c"},
	} {
		if got := fleet.Subject(c.dev, c.kind, c.id); got != c.want {
			t.Errorf("Subject(%s, %s, %s) = %s, want %s", c.dev, c.kind, c.id, got, c.want)
		}
	}
	for _, bad := range []string{"", "a.b", "a b", "*", ">", "-lead", strings.Repeat("x", 65)} {
		if err := fleet.ValidDevice(bad); err == nil {
			t.Errorf("device name %q accepted", bad)
		}
	}
}

// A message on the index stream that does not decode (a device's bug, a stray publish) is named
// in the fleet's view and its report, and the rest of the fleet is read as usual.
func TestOneUnreadableMessageLeavesTheRestOfTheFleetReadable(t *testing.T) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	_, js := client(t, hub.URL())
	dv := startDevice(t, hub.URL(), "board", storeIn(t, "store"))
	id := submit(t, dv, taskYAML(t, "good", 1, "5ms", false))
	waitFor(t, "the fleet shows it", 30*time.Second, func() (bool, string) { return caughtUp(js, dv) })
	ctx := context.Background()
	for subj, data := range map[string]string{fleet.Subject("stray", "hb", ""): "xx", fleet.Subject("stray", "idx", "bad"): "{not json"} {
		if _, err := js.Publish(ctx, strings.TrimSuffix(subj, "."), []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := fleet.List(ctx, js)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(f.Harnesses) != 1 || f.Harnesses[0].Entry.ID != id || len(f.Devices) != 1 || f.Devices[0].Name != "board" {
		t.Fatalf("the readable part: %+v", f)
	}
	var got []string
	for _, u := range f.Unreadable {
		got = append(got, u.Device+"/"+u.Harness+": "+u.Error)
	}
	if len(got) != 2 || !strings.Contains(got[0], "stray/: heartbeat of device stray is not valid") || !strings.Contains(got[1], "stray/bad: index entry of stray/bad is not valid") {
		t.Fatalf("unreadable: %q", got)
	}
	r, err := fleet.BuildReport(ctx, js, nil, 0)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	var damaged []string
	for _, d := range r.Devices {
		for _, h := range d.Report.Damaged {
			damaged = append(damaged, d.Device+"/"+h.ID)
		}
	}
	if len(r.Devices) != 2 || strings.Join(damaged, " ") != "stray/bad" {
		t.Fatalf("report: %d devices, damaged %q", len(r.Devices), damaged)
	}
}

// A pass reads from the store only the harnesses that changed: with many harnesses at rest, a
// running one costs each pass about the same as alone. (Every pass used to read every harness,
// its task, its records and its events: with 3,000 at rest, a 300-step harness cost the daemon
// 3.4 s of CPU instead of 1.5 s, and the replication lag grew from 25 to 160 ms at the median.)
func TestAPassReadsOnlyTheHarnessesThatChanged(t *testing.T) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	_, js := client(t, hub.URL())
	dv := startDevice(t, hub.URL(), "pi1", storeIn(t, "store"))
	const atRest = 60
	for i := range atRest {
		submit(t, dv, taskYAML(t, fmt.Sprintf("rest%d", i), 1, "", false))
	}
	waitFor(t, "pi1 settles", 120*time.Second, func() (bool, string) { return settled(dv) })
	waitFor(t, "the fleet catches up", 60*time.Second, func() (bool, string) { return caughtUp(js, dv) })
	before := dv.link.Replicator.Stats()
	submit(t, dv, taskYAML(t, "busy", 40, "5ms", false))
	waitFor(t, "busy completes", 60*time.Second, func() (bool, string) { return settled(dv) })
	waitFor(t, "the fleet catches up", 60*time.Second, func() (bool, string) { return caughtUp(js, dv) })
	after := dv.link.Replicator.Stats()
	passes, read := after.Passes-before.Passes, after.Read-before.Read
	if passes == 0 {
		t.Fatal("no pass ran")
	}
	// At most the busy harness a pass, and one full pass of every harness (FullPassEvery).
	if limit := passes + atRest + 1; read > limit {
		t.Fatalf("%d passes read %d harnesses from the store (%.1f a pass), want at most %d: the ones at rest were read again and again", passes, read, float64(read)/float64(passes), limit)
	}
}
