package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
	"github.com/nats-io/nats.go"
)

// ackDropper is a TCP proxy in front of a NATS server that forwards everything except one
// JetStream acknowledgement: the first one of the message the stream stores at sequence drop.
// The message itself reaches the server and is stored; its sender never hears so.
type ackDropper struct {
	l       net.Listener
	stream  string
	drop    uint64
	dropped atomic.Bool
}

func newAckDropper(t *testing.T, to, stream string, drop uint64) *ackDropper {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &ackDropper{l: l, stream: stream, drop: drop}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _ = p.serverToClient(in, out); in.Close() }()
		}
	}()
	return p
}

func (p *ackDropper) url() string { return "nats://" + p.l.Addr().String() }

// serverToClient copies the server's protocol to the client, frame by frame (MSG and HMSG
// with their payloads), leaving out the one acknowledgement to drop.
func (p *ackDropper) serverToClient(client net.Conn, server net.Conn) error {
	r := bufio.NewReader(server)
	w := bufio.NewWriter(client)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		frame := []byte(line)
		var payload []byte
		if f := strings.Fields(line); len(f) >= 3 && (f[0] == "MSG" || f[0] == "HMSG") {
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return err
			}
			payload = make([]byte, n+2)
			if _, err := io.ReadFull(r, payload); err != nil {
				return err
			}
			frame = append(frame, payload...)
		}
		if payload != nil && p.isTheAck(payload) {
			continue
		}
		if _, err := w.Write(frame); err != nil {
			return err
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

func (p *ackDropper) isTheAck(payload []byte) bool {
	var ack struct {
		Stream    string `json:"stream"`
		Seq       uint64 `json:"seq"`
		Duplicate bool   `json:"duplicate"`
	}
	if json.Unmarshal(payload, &ack) != nil || ack.Stream != p.stream || ack.Seq != p.drop || ack.Duplicate {
		return false
	}
	return p.dropped.CompareAndSwap(false, true)
}

// readCursor reads a store's replication cursor as JSON.
func readCursor(t *testing.T, dir string) map[string]struct{ Record, Event uint64 } {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, fleet.CursorFile))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Harnesses map[string]struct{ Record, Event uint64 } `json:"harnesses"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.Harnesses
}

// A pass publishes its messages without waiting for each acknowledgement. When one of them is
// never acknowledged (here the hub stored it, but its acknowledgement was lost on the way),
// the cursor stays before it although messages after it were acknowledged, no index entry
// goes out ahead of it, and the next pass sends it and what followed again: JetStream drops
// the copies, and holds every message once, in order. With more messages than the window
// holds, the failure is seen while the pass still publishes: it sends no more of the harness.
func TestAnAcknowledgementThatNeverComesHoldsTheCursorAndTheMessageGoesAgainOnce(t *testing.T) {
	for _, steps := range []int{4, 80} {
		t.Run(fmt.Sprintf("steps=%d", steps), func(t *testing.T) { lostAcknowledgement(t, steps) })
	}
}

func lostAcknowledgement(t *testing.T, steps int) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	_, js := client(t, hub.URL())
	dir := storeIn(t, "store")

	// A store with a finished harness, made offline.
	ctx, cancel := context.WithCancel(context.Background())
	d, err := control.StartDaemon(ctx, control.DaemonConfig{Dir: dir, Concurrency: 1, Grace: 20 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	dv := &device{name: "solo", dir: dir, d: d}
	id := submit(t, dv, taskYAML(t, "job", steps, "", false))
	waitFor(t, "settles", 30*time.Second, func() (bool, string) { return settled(dv) })
	cancel()
	d.Wait()
	db, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	idx, err := db.Index(id)
	if err != nil {
		t.Fatal(err)
	}
	var events uint64
	if err := db.StoredEvents(id, 0, func(uint64, []byte) error { events++; return nil }); err != nil {
		t.Fatal(err)
	}
	var stored []uint64 // the records the store holds (a keyframe released those before it)
	if err := db.StoredRecords(id, 0, func(seq uint64, _ []byte) error { stored = append(stored, seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 || events < 3 {
		t.Fatalf("the harness holds %d records and %d events; the test needs more", len(stored), events)
	}

	// The pass sends the task (stream sequence 1), the records, then the events: the
	// acknowledgement of the first record is lost; those of every message after it come.
	proxy := newAckDropper(t, hostPort(t, hub.URL()), fleet.StreamLog, 2)
	link, err := fleet.NewLink(fleet.LinkConfig{NATS: fleet.Options{URL: proxy.url()}, Device: "solo"})
	if err != nil {
		t.Fatal(err)
	}
	rep := link.Replicator
	rep.AckWait = 500 * time.Millisecond
	err = rep.Sync(context.Background(), db)
	if err == nil || !strings.Contains(err.Error(), "he.fleet.solo.rec.job: no acknowledgement from JetStream within 500ms") || !proxy.dropped.Load() {
		t.Fatalf("the pass with a lost acknowledgement returned %v (dropped: %v)", err, proxy.dropped.Load())
	}
	s := rep.Stats()
	if at := readCursor(t, dir)[id]; at.Record != 0 || at.Event != 0 {
		t.Fatalf("after the lost acknowledgement of the first record the cursor is at record %d, event %d; want 0, 0", at.Record, at.Event)
	}
	all := 1 + uint64(len(stored)) + events // the task, the records, the events
	first := s.Messages                     // acknowledged: all sent but the first record, and the heartbeat
	t.Logf("%d messages to send, %d acknowledged in the first pass", all, first)
	if s.Records != 0 || s.Events != 0 || s.Backlog != idx.HeadSeq {
		t.Fatalf("after the first pass: %+v; want no record or event counted as sent, a backlog of %d", s, idx.HeadSeq)
	}
	if all <= fleet.WindowMessages {
		if first != all {
			t.Fatalf("after the first pass: %d messages acknowledged; want %d (all but the first record, and the heartbeat)", first, all)
		}
	} else if first != fleet.WindowMessages+1 {
		// The window was full when the lost acknowledgement's wait ended: the task was
		// acknowledged meanwhile (one more sent), and nothing of the harness after that.
		t.Fatalf("after the first pass: %d of %d messages acknowledged; want %d: those in the window when the acknowledgement was found lost, and the heartbeat", first, all, fleet.WindowMessages+1)
	}
	if _, err := fleet.Show(context.Background(), js, nil, "solo", id); err == nil || !strings.Contains(err.Error(), "holds no harness") {
		t.Fatalf("an index entry went out ahead of a record JetStream did not acknowledge: fleet show says %v", err)
	}

	if err := rep.Sync(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	s = rep.Stats()
	// Sent again: every record and event the first pass sent (all held by the stream, the
	// first record too), dropped as duplicates.
	if want := first - 1; s.Duplicates != want || s.Records != uint64(len(stored)) || s.Events != events || s.Indexes != 1 || s.Backlog != 0 {
		t.Fatalf("after the second pass: %+v; want %d duplicates, %d records, %d events, an index entry, no backlog", s, want, len(stored), events)
	}
	if at := readCursor(t, dir)[id]; at.Record != idx.HeadSeq || at.Event != events {
		t.Fatalf("the cursor is at record %d, event %d; want %d, %d", at.Record, at.Event, idx.HeadSeq, events)
	}
	recs, err := fleet.Records(context.Background(), js, "solo", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(stored) {
		t.Fatalf("the hub holds %d records, the store %d", len(recs), len(stored))
	}
	for i, r := range recs {
		if r.Seq != stored[i] {
			t.Fatalf("the hub holds record %d in place %d; the store's records are %v", r.Seq, i+1, stored)
		}
	}
	shown, err := fleet.Show(context.Background(), js, nil, "solo", id)
	if err != nil {
		t.Fatal(err)
	}
	if shown.Events != events || shown.Duplicates != 0 || shown.State.Status != idx.Status {
		t.Fatalf("fleet show: %d events (want %d), %d duplicates, status %s (want %s)", shown.Events, events, shown.Duplicates, shown.State.Status, idx.Status)
	}
}

// A stream may hold a harness's records and events out of their order (a message refused in
// a window is sent again after the ones behind it), and a record twice: `fleet show` and an
// adoption read them in order by number, each once.
func TestRecordsAndEventsHeldOutOfOrderAreReadInOrder(t *testing.T) {
	hub := startHub(t, t.TempDir(), "127.0.0.1:0")
	_, js := client(t, hub.URL())
	dv := startDevice(t, hub.URL(), "board", storeIn(t, "store"))
	// Harnesses of a few steps that wait at a gate before their last: one of them rebuilds from
	// a keyframe and deltas (a keyframe comes when the deltas outgrow the state, which depends
	// on the timings they hold).
	var ids []string
	for i, steps := range []int{2, 3, 4, 5} {
		ids = append(ids, submit(t, dv, taskYAML(t, fmt.Sprintf("job%d", i), steps, "", true)))
	}
	waitFor(t, "settles", 30*time.Second, func() (bool, string) { return settled(dv) })
	waitFor(t, "caught up", 30*time.Second, func() (bool, string) { return caughtUp(js, dv) })
	ctx := context.Background()
	var id string
	var want *fleet.Shown
	for _, h := range ids {
		shown, err := fleet.Show(ctx, js, nil, "board", h)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil || shown.Verified > want.Verified {
			id, want = h, shown
		}
	}
	recs, err := fleet.Records(ctx, js, "board", id)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := fleet.ReadReplicated(ctx, js, "board", id)
	if err != nil {
		t.Fatal(err)
	}
	minRecords := 2
	if e, _ := bridge.Load(); e.Backend() == bridge.BackendFallback {
		minRecords = 1 // the fallback writes keyframes only: a chain is its newest record
	}
	if want.Verified < minRecords || len(rep.Replica.Events) < 3 {
		t.Fatalf("the harness rebuilds from %d records with %d events; the test needs more", want.Verified, len(rep.Replica.Events))
	}

	// The same messages under another device name, each kind in reverse order, the newest
	// record twice.
	gen := strconv.FormatInt(rep.Entry.CreatedAt.UnixNano(), 36)
	publish := func(kind string, n uint64, data []byte) {
		t.Helper()
		m := nats.NewMsg(fleet.Subject("copy", kind, id))
		m.Header.Set(fleet.HeaderHarness, id)
		m.Header.Set(fleet.HeaderDevice, "copy")
		m.Header.Set(fleet.HeaderSeq, strconv.FormatUint(n, 10))
		m.Header.Set(fleet.HeaderGen, gen)
		m.Data = data
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	publish("task", 0, rep.Replica.Task)
	publish("rec", recs[len(recs)-1].Seq, recs[len(recs)-1].Envelope)
	for i := len(recs) - 1; i >= 0; i-- {
		publish("rec", recs[i].Seq, recs[i].Envelope)
	}
	for i := len(rep.Replica.Events) - 1; i >= 0; i-- {
		publish("evt", rep.Replica.Events[i].N, rep.Replica.Events[i].Data)
	}
	publish("idx", rep.Entry.HeadSeq, rep.Replica.IndexJSON)

	got, err := fleet.Show(ctx, js, nil, "copy", id)
	if err != nil {
		t.Fatalf("fleet show of records held out of order: %v", err)
	}
	wj, _ := statefmt.EncodeJSON(want.State)
	gj, _ := statefmt.EncodeJSON(got.State)
	if !bytes.Equal(wj, gj) || got.Verified != want.Verified || got.Events != want.Events || got.Duplicates != 1 {
		t.Fatalf("fleet show of records held out of order: %d verified (want %d), %d events (want %d), %d duplicates (want 1), states equal: %v",
			got.Verified, want.Verified, got.Events, want.Events, got.Duplicates, bytes.Equal(wj, gj))
	}
	again, err := fleet.ReadReplicated(ctx, js, "copy", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Replica.Records) != len(rep.Replica.Records) || len(again.Replica.Events) != len(rep.Replica.Events) {
		t.Fatalf("read for an adoption: %d records, %d events; want %d, %d", len(again.Replica.Records), len(again.Replica.Events), len(rep.Replica.Records), len(rep.Replica.Events))
	}
	for i, e := range again.Replica.Events {
		if e.N != rep.Replica.Events[i].N || !bytes.Equal(e.Data, rep.Replica.Events[i].Data) {
			t.Fatalf("read for an adoption: event %d is number %d; want %d", i, e.N, rep.Replica.Events[i].N)
		}
	}
	// fleet events prints them as the stream holds them (here in reverse), each once.
	var printed []uint64
	if err := fleet.Events(ctx, js, "copy", id, false, func(e event.Event) error { printed = append(printed, e.N); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(printed) != len(rep.Replica.Events) {
		t.Fatalf("fleet events printed %d events (%v); want %d", len(printed), printed, len(rep.Replica.Events))
	}
	for i, n := range printed {
		if want := rep.Replica.Events[len(printed)-1-i].N; n != want {
			t.Fatalf("fleet events printed %v; want the stream's order, from %d down", printed, rep.Replica.Events[len(printed)-1].N)
		}
	}
	for i, r := range again.Replica.Records {
		if !bytes.Equal(r, rep.Replica.Records[i]) {
			t.Fatalf("read for an adoption: record %d of the chain differs", i)
		}
	}
}
