package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// startHub starts a hub with JetStream in dir on listen (127.0.0.1:0 for a free port).
func startHub(t *testing.T, dir, listen string) *fleet.Hub {
	t.Helper()
	h, err := fleet.StartHub(fleet.HubConfig{Dir: dir, Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Shutdown)
	return h
}

// hostPort is the host:port of a nats:// URL.
func hostPort(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// client connects to NATS as a fleet command does.
func client(t *testing.T, u string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := fleet.Connect(fleet.Options{URL: u}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// device is a daemon joined to the fleet, in this process.
type device struct {
	name string
	dir  string
	d    *control.Daemon
	link *fleet.Link
	log  *syncBuffer
	stop func()
}

func (dv *device) srv() *control.Server { return dv.d.Server() }
func (dv *device) db() *store.Store     { return dv.d.Server().Store() }

// startDevice starts a daemon on the store in dir, replicating to NATS at u as name.
func startDevice(t *testing.T, u, name, dir string) *device {
	t.Helper()
	log := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	l, err := fleet.NewLink(fleet.LinkConfig{NATS: fleet.Options{URL: u}, Device: name, Version: "test", Log: logger, Poll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg := control.DaemonConfig{Dir: dir, Concurrency: 4, Grace: 20 * time.Second, Version: "test", Logger: logger}
	l.Join(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	d, err := control.StartDaemon(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	dv := &device{name: name, dir: dir, d: d, link: l, log: log}
	dv.stop = func() { once.Do(func() { cancel(); d.Wait() }) }
	t.Cleanup(dv.stop)
	return dv
}

// taskYAML is a script task of steps that each sleep and write a line; with gate, the last
// step is critical at autonomy 3, so it waits for a human.
func taskYAML(t testing.TB, id string, steps int, sleep string, gate bool) []byte {
	t.Helper()
	var plan strings.Builder
	for i := range steps {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("s%d", i-1)
		}
		crit := ""
		if gate && i == steps-1 {
			crit = ", critical: true"
		}
		fmt.Fprintf(&plan, "        - {id: s%d, description: step %d, agent: A, dependsOn: [%s]%s}\n", i, i, dep, crit)
	}
	sleepLine := ""
	if sleep != "" {
		sleepLine = "          - {sleep: " + sleep + "}\n"
	}
	return []byte(fmt.Sprintf(`id: %s
agent: A
autonomy: 3
budget: {toolCalls: 1000000}
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      plan:
%s      steps:
        "*":
%s          - {tool: write_file, args: {path: %s.txt, content: "a line"}}
          - {output: done}
`, id, t.TempDir(), plan.String(), sleepLine, id))
}

func submit(t *testing.T, dv *device, task []byte) string {
	t.Helper()
	id, err := dv.srv().Submit(context.Background(), control.Submission{Task: task, Name: "task.yaml", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %s", what, timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settled reports whether every harness of the device has come to rest (completed, failed or
// paused).
func settled(dv *device) (bool, string) {
	l, err := dv.db().List()
	if err != nil {
		return false, err.Error()
	}
	for _, e := range l {
		if e.Status == statefmt.StatusRunning || e.Status == statefmt.StatusCreated {
			return false, fmt.Sprintf("%s/%s is %s", dv.name, e.ID, e.Status)
		}
	}
	return true, ""
}

// caughtUp reports whether the fleet view shows every harness of every device with the
// device's own head and status.
func caughtUp(js jetstream.JetStream, devs ...*device) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := fleet.List(ctx, js)
	if err != nil {
		return false, err.Error()
	}
	seen := map[string]store.IndexEntry{}
	for _, h := range f.Harnesses {
		seen[h.Device+"/"+h.Entry.ID] = h.Entry
	}
	for _, dv := range devs {
		l, err := dv.db().List()
		if err != nil {
			return false, err.Error()
		}
		for _, e := range l {
			got, ok := seen[dv.name+"/"+e.ID]
			if !ok || got.HeadSeq != e.HeadSeq || got.Status != e.Status {
				return false, fmt.Sprintf("%s/%s: the fleet has %+v, the device %+v", dv.name, e.ID, got, e)
			}
		}
	}
	return true, ""
}

// checkReplica checks every harness of a device against what the hub holds: every record the
// device made (also those a keyframe has since released on the device), in order, none twice,
// each of the device's stored records with the same bytes; every event; and the state `fleet show` rebuilds
// equal to the device's own.
func checkReplica(t *testing.T, js jetstream.JetStream, dv *device) (records int) {
	t.Helper()
	ctx := context.Background()
	l, err := dv.db().List()
	if err != nil {
		t.Fatal(err)
	}
	if len(l) == 0 {
		t.Fatalf("device %s holds no harness", dv.name)
	}
	for _, e := range l {
		name := dv.name + "/" + e.ID
		got, err := fleet.Records(ctx, js, dv.name, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		bySeq := map[uint64][]byte{}
		var last uint64
		for i, r := range got {
			if r.Seq <= last {
				t.Fatalf("%s: replicated record %d (the %dth) comes after record %d: out of order or twice", name, r.Seq, i+1, last)
			}
			if r.Seq != last+1 {
				t.Fatalf("%s: replicated records jump from %d to %d: records were lost", name, last, r.Seq)
			}
			last = r.Seq
			bySeq[r.Seq] = r.Envelope
		}
		if last != e.HeadSeq {
			t.Fatalf("%s: the last replicated record is %d, the device's head %d", name, last, e.HeadSeq)
		}
		n := 0
		err = dv.db().StoredRecords(e.ID, 0, func(seq uint64, env []byte) error {
			n++
			if !bytes.Equal(bySeq[seq], env) {
				return fmt.Errorf("record %d: the hub holds %d bytes that differ from the device's %d", seq, len(bySeq[seq]), len(env))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n == 0 {
			t.Fatalf("%s: the device holds no records", name)
		}
		records += len(got)
		var events uint64
		if err := dv.db().StoredEvents(e.ID, 0, func(uint64, []byte) error { events++; return nil }); err != nil {
			t.Fatal(err)
		}
		shown, err := fleet.Show(ctx, js, nil, dv.name, e.ID)
		if err != nil {
			t.Fatalf("%s: fleet show: %v", name, err)
		}
		if shown.Events != events || shown.Duplicates != 0 {
			t.Fatalf("%s: the hub holds %d events (%d duplicate records), the device %d events", name, shown.Events, shown.Duplicates, events)
		}
		want, err := dv.srv().State(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		wj, _ := statefmt.EncodeJSON(want)
		gj, _ := statefmt.EncodeJSON(shown.State)
		if !bytes.Equal(wj, gj) {
			t.Fatalf("%s: fleet show rebuilt a state that differs from the device's show:\nfleet:  %s\ndevice: %s", name, gj, wj)
		}
	}
	return records
}

func storeIn(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(t.TempDir(), name)
}

func removeCursor(dir string) error { return os.Remove(filepath.Join(dir, fleet.CursorFile)) }
