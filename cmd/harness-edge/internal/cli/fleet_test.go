package cli

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
)

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
	for i, wantOut := range []string{"pi2/job: gate g1 (step, step s1) approved; the device's daemon resumes it\n",
		"pi2/job: gate g1 (step, step s1) approved; the device's daemon resumes it (this request was applied before; nothing changed now)\n"} {
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
