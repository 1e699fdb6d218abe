package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// hubStream connects to the NATS server at url for the test's own reads of what the hub holds;
// the connection closes when the test ends.
func hubStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := fleet.Connect(fleet.Options{URL: url}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// startHub starts `hub --listen 127.0.0.1:0` as a child process and returns its URL.
func startHub(t *testing.T, dir string) string {
	t.Helper()
	cmd := child("--store", dir, "hub", "--listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line <- sc.Text()
		}
	}()
	select {
	case l := <-line:
		url, _, ok := strings.Cut(strings.TrimPrefix(l, "hub listening on "), " ")
		if !ok || !strings.HasPrefix(url, "nats://127.0.0.1:") {
			t.Fatalf("the hub says: %q", l)
		}
		return url
	case <-time.After(30 * time.Second):
		t.Fatal("the hub did not start")
		return ""
	}
}

// TestFleetThroughTheCommandLine runs a hub and two daemons as processes: each device's
// harnesses appear in `fleet ls` with the state `show` gives on the device, `fleet show`
// rebuilds the same state, and `fleet approve` (sent twice with one request id) lets the
// gated harness finish, applied once.
func TestFleetThroughTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	url := startHub(t, filepath.Join(dir, "hub"))
	ws := filepath.Join(dir, "ws")
	stores := map[string]string{"pi1": filepath.Join(dir, "pi1"), "pi2": filepath.Join(dir, "pi2")}
	for dev, db := range stores {
		startDaemon(t, db, "--nats", url, "--device", dev)
		task := writeTask(t, dir, dev+".yaml", daemonTask("job", ws, 2, "5ms", dev == "pi2"))
		if code, out, stderr := run(t, "--store", db, "submit", task); code != ExitOK {
			t.Fatalf("submit on %s: exit %d: %s%s", dev, code, out, stderr)
		}
	}
	want := map[string]statefmt.Status{"pi1/job": statefmt.StatusCompleted, "pi2/job": statefmt.StatusPaused}
	waitFleet := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, out, stderr := run(t, "fleet", "ls", "--json", "--nats", url)
			var f fleet.Fleet
			if code == ExitOK && json.Unmarshal([]byte(out), &f) == nil {
				got := map[string]statefmt.Status{}
				for _, h := range f.Harnesses {
					got[h.Device+"/"+h.Entry.ID] = h.Entry.Status
				}
				if len(got) == len(want) && got["pi1/job"] == want["pi1/job"] && got["pi2/job"] == want["pi2/job"] && len(f.Devices) == 2 {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("fleet ls: exit %d, want %v:\n%s%s", code, want, out, stderr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFleet()
	for dev, db := range stores {
		_, local, _ := run(t, "--store", db, "show", "job", "--json")
		code, remote, stderr := run(t, "fleet", "show", dev+"/job", "--json", "--nats", url)
		if code != ExitOK || remote != local {
			t.Fatalf("fleet show %s/job: exit %d %s\nfleet:  %s\ndevice: %s", dev, code, stderr, remote, local)
		}
	}
	code, out, stderr := run(t, "fleet", "ls", "--nats", url)
	if code != ExitOK || !strings.Contains(out, "pi2/job") || !strings.Contains(out, "paused") {
		t.Fatalf("fleet ls: exit %d:\n%s%s", code, out, stderr)
	}

	// Approve from here; the same request again is answered, not applied again.
	for i, wantOut := range []string{"pi2/job: gate g1 before step s1 approved; the device's daemon resumes it\n",
		"pi2/job: gate g1 before step s1 approved; the device's daemon resumes it (this request was applied before; nothing changed now)\n"} {
		code, out, stderr := run(t, "fleet", "approve", "pi2/job", "g1", "--request-id", "once", "--nats", url)
		if code != ExitOK || out != wantOut {
			t.Fatalf("fleet approve (%d): exit %d: %q %s", i+1, code, out, stderr)
		}
	}
	want["pi2/job"] = statefmt.StatusCompleted
	waitFleet()
	_, events, _ := run(t, "--store", stores["pi2"], "events", "job", "--json")
	if n := strings.Count(events, `"action":"approved"`); n != 1 {
		t.Fatalf("the device logged %d approvals, want 1:\n%s", n, events)
	}

	// Mistakes: a clear error, the documented exit code, nothing changed.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"fleet", "show", "job"}, ExitUsage, `"job": name a harness as DEVICE/ID`},
		{[]string{"fleet", "show", "pi1/nothing"}, ExitError, "the fleet holds no harness nothing on device pi1"},
		{[]string{"fleet", "approve", "pi1/job", "g1", "--request-id", "x"}, ExitError, "device pi1: harness job: no pending gate g1"},
		{[]string{"fleet", "reject", "pi1/job", "g1"}, ExitUsage, "reject needs --reason TEXT"},
		{[]string{"fleet", "approve", "gone/job", "--timeout", "1s"}, ExitError, "device gone does not answer"},
	} {
		code, out, stderr := run(t, append(c.args, "--nats", url)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d (want %d): %s%s", c.args, code, c.code, out, stderr)
		}
	}
	if code, _, stderr := run(t, "fleet", "ls", "--nats", "nats://127.0.0.1:1", "--timeout", "1s"); code != ExitError || !strings.Contains(stderr, "NATS at nats://127.0.0.1:1") {
		t.Errorf("fleet ls without a hub: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run(t, "--store", filepath.Join(dir, "x"), "serve", "--device", "pi3"); code != ExitUsage || !strings.Contains(stderr, "need --nats URL") {
		t.Errorf("serve --device without --nats: exit %d: %s", code, stderr)
	}
}

// TestFleetReplicationAcrossADeviceKilledWithSIGKILL kills a device's daemon with SIGKILL
// while its harness runs and replicates, and starts it again: the harness completes, and the
// hub holds its records in order, none twice, each the device's bytes, with the head.
func TestFleetReplicationAcrossADeviceKilledWithSIGKILL(t *testing.T) {
	dir := t.TempDir()
	url := startHub(t, filepath.Join(dir, "hub"))
	db, ws := filepath.Join(dir, "dev"), filepath.Join(dir, "ws")
	d := startDaemon(t, db, "--nats", url, "--device", "crashy")
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "k.yaml", daemonTask("k", ws, 12, "40ms", false))); code != ExitOK {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st := waitStatus(t, db, "k", statefmt.StatusRunning); st.Plan.Steps[4].Status == statefmt.StepCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("k never got going")
		}
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	d = startDaemon(t, db, "--nats", url, "--device", "crashy")
	waitStatus(t, db, "k", statefmt.StatusCompleted)
	js := hubStream(t, url)
	ctx := context.Background()
	var recs []fleet.Record
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		f, err := fleet.List(ctx, js)
		if err == nil && len(f.Harnesses) == 1 && f.Harnesses[0].Entry.Status == statefmt.StatusCompleted {
			if recs, err = fleet.Records(ctx, js, "crashy", "k"); err == nil && len(recs) > 0 && recs[len(recs)-1].Seq == f.Harnesses[0].Entry.HeadSeq {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hub did not catch up: %v %+v", err, f)
		}
	}
	// Stop the daemon to read its store.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	s, err := store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[uint64][]byte{}
	var last uint64
	for _, r := range recs {
		if r.Seq <= last {
			t.Fatalf("record %d after record %d: out of order or twice", r.Seq, last)
		}
		if r.Seq != last+1 {
			// Only records a keyframe released while the killed daemon had not sent them yet.
			rec, err := statefmt.DecodeRecord(r.Envelope)
			if err != nil || rec.Kind != statefmt.KindKeyframe {
				t.Fatalf("records jump from %d to %d, which is not a keyframe (%v)", last, r.Seq, err)
			}
			t.Logf("records %d-%d were released on the device before they were sent", last+1, r.Seq-1)
		}
		bySeq[r.Seq], last = r.Envelope, r.Seq
	}
	n := 0
	err = s.StoredRecords("k", 0, func(seq uint64, env []byte) error {
		n++
		if !bytes.Equal(bySeq[seq], env) {
			return fmt.Errorf("record %d differs on the hub", seq)
		}
		return nil
	})
	s.Close()
	if err != nil || n == 0 {
		t.Fatalf("%d records of the device checked: %v", n, err)
	}
	code, remote, stderr := run(t, "fleet", "show", "crashy/k", "--json", "--nats", url)
	_, local, _ := run(t, "--store", db, "show", "k", "--json")
	if code != ExitOK || remote != local {
		t.Fatalf("fleet show after the crash: exit %d %s\nfleet:  %s\ndevice: %s", code, stderr, remote, local)
	}
	t.Logf("%d records on the hub, %d in the device's store", len(recs), n)
}
