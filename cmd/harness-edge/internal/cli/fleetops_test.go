package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
)

// eventually runs a fleet command until check accepts its output, or fails the test.
func eventually(t *testing.T, what string, args []string, check func(out string) bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out, stderr := run(t, args...)
		if code == ExitOK && check(out) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: exit %d:\n%s%s", what, code, out, stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFleetEventsReportPauseResumeAndTell runs a hub and two daemons as processes: a running
// harness is paused from the fleet and resumed to completion (each request sent twice, applied
// once), `fleet events` prints what the device's own `events` prints, `fleet report` gives
// both devices' harnesses with their statuses and the gate that waits, `fleet tell` reaches a
// loop's next iteration once, and bad requests are refused with the local commands' errors and
// exit codes, changing nothing.
func TestFleetEventsReportPauseResumeAndTell(t *testing.T) {
	dir := t.TempDir()
	url := startHub(t, filepath.Join(dir, "hub"))
	ws := mkdir(t, filepath.Join(dir, "ws"))
	// The daemons run the loop's agent with their own environment: iteration 1 waits for the
	// release file, which the test writes after its tells.
	release := filepath.Join(dir, "release")
	t.Setenv("FAKE_PAUSE_AT", "1")
	t.Setenv("FAKE_RELEASE", release)
	pi1, pi2 := filepath.Join(dir, "pi1"), filepath.Join(dir, "pi2")
	startDaemon(t, pi1, "--nats", url, "--device", "pi1")
	startDaemon(t, pi2, "--nats", url, "--device", "pi2")
	if code, out, stderr := run(t, "--store", pi1, "submit", writeTask(t, dir, "slow.yaml", daemonTask("slow", ws, 40, "50ms", false))); code != ExitOK {
		t.Fatalf("submit on pi1: exit %d: %s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "--store", pi2, "submit", writeTask(t, dir, "gated.yaml", daemonTask("gated", ws, 2, "5ms", true))); code != ExitOK {
		t.Fatalf("submit on pi2: exit %d: %s%s", code, out, stderr)
	}
	loopWS := mkdir(t, filepath.Join(dir, "loopws"))
	if code, out := binary(t, pi2, loopArgs(t, pi2, loopWS, "web")[2:]...); code != ExitOK {
		t.Fatalf("loop on pi2: exit %d\n%s", code, out)
	}
	waitStatus(t, pi1, "slow", statefmt.StatusRunning)

	// Pause pi1/slow from the fleet, twice with one request id: applied once.
	for i, want := range []string{"pi1/slow: paused\n", "pi1/slow: paused (this request was applied before; nothing changed now)\n"} {
		code, out, stderr := run(t, "fleet", "pause", "pi1/slow", "--request-id", "p1", "--nats", url)
		if code != ExitOK || out != want {
			t.Fatalf("fleet pause (%d): exit %d: %q %s", i+1, code, out, stderr)
		}
	}
	if st := waitStatus(t, pi1, "slow", statefmt.StatusPaused); st.StatusReason == "" {
		t.Fatalf("paused without a reason: %+v", st.Status)
	}

	// Tell the loop on pi2 while its first iteration runs; the same request again stores nothing.
	waitForFile(t, filepath.Join(loopWS, "working.1"))
	for i, want := range []string{"pi2/web: message stored; the next iteration's prompt carries it\n",
		"pi2/web: message stored; the next iteration's prompt carries it (this request was applied before; nothing changed now)\n"} {
		code, out, stderr := run(t, "fleet", "tell", "pi2/web", toldText, "--request-id", "t1", "--nats", url)
		if code != ExitOK || out != want {
			t.Fatalf("fleet tell (%d): exit %d: %q %s", i+1, code, out, stderr)
		}
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, pi2, "web", statefmt.StatusCompleted)
	if n := strings.Count(readFile(t, filepath.Join(loopWS, "prompts.log")), toldText); n != 1 {
		t.Fatalf("the message is in %d prompts, want 1", n)
	}
	if p2 := readFile(t, filepath.Join(loopWS, "prompt.2")); !strings.Contains(p2, "[Message from the human, ") || !strings.Contains(p2, toldText) {
		t.Fatalf("iteration 2's prompt lacks the message:\n%s", p2)
	}

	// The report: both devices, each harness with its status, the gate that waits on pi2.
	out := eventually(t, "fleet report", []string{"fleet", "report", "--json", "--since", "0", "--nats", url}, func(out string) bool {
		var r fleet.Report
		if json.Unmarshal([]byte(out), &r) != nil || len(r.Devices) != 2 {
			return false
		}
		got := map[string]statefmt.Status{}
		for _, d := range r.Devices {
			for _, h := range d.Report.Harnesses {
				got[d.Device+"/"+h.ID] = h.Status
			}
		}
		return len(got) == 3 && got["pi1/slow"] == statefmt.StatusPaused && got["pi2/gated"] == statefmt.StatusPaused && got["pi2/web"] == statefmt.StatusCompleted &&
			len(r.Devices[1].Report.Waiting) == 1 && r.Devices[1].Report.Waiting[0].Gate == "g1" && r.Devices[0].Heartbeat != nil
	})
	var r fleet.Report
	_ = json.Unmarshal([]byte(out), &r)
	if d := r.Devices[0]; d.Device != "pi1" || d.Report.Counts[statefmt.StatusPaused] != 1 || d.Report.Harnesses[0].StepsDone == 0 || d.Report.Harnesses[0].Steps != 40 ||
		d.Report.Harnesses[0].StoredBytes == 0 || d.Report.StoredBytes != d.Report.Harnesses[0].StoredBytes {
		t.Fatalf("pi1's report: %+v %+v", d.Report.Counts, d.Report.Harnesses)
	}
	code, text, stderr := run(t, "fleet", "report", "--since", "0", "--nats", url)
	for _, want := range []string{"device pi1: last heartbeat", "device pi2: last heartbeat", "\npaused\n  slow", "\ncompleted\n  web",
		"waiting for a human\n  gated gate g1 before step s1", "harness-edge fleet approve pi2/gated g1  |  harness-edge fleet reject pi2/gated g1 --reason TEXT"} {
		if code != ExitOK || !strings.Contains(text, want) {
			t.Fatalf("fleet report lacks %q: exit %d:\n%s%s", want, code, text, stderr)
		}
	}

	// Events as replicated are the device's own, line for line and as JSON.
	for _, asJSON := range [][]string{nil, {"--json"}} {
		_, local, _ := run(t, append([]string{"--store", pi1, "events", "slow"}, asJSON...)...)
		eventually(t, "fleet events", append([]string{"fleet", "events", "pi1/slow", "--nats", url}, asJSON...), func(out string) bool { return out == local && out != "" })
	}

	// Follow its events from the fleet while it is resumed.
	followed := filepath.Join(dir, "followed.txt")
	fout, err := os.Create(followed)
	if err != nil {
		t.Fatal(err)
	}
	follow := child("fleet", "events", "pi1/slow", "--follow", "--nats", url)
	follow.Stdout = fout
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follow.Process.Kill(); _ = follow.Wait() })

	// Resume it from the fleet, twice with one request id: it runs to completion once.
	for i, want := range []string{"pi1/slow: queued in the device's daemon; follow it with `harness-edge fleet events pi1/slow --follow`\n",
		"pi1/slow: queued in the device's daemon; follow it with `harness-edge fleet events pi1/slow --follow` (this request was applied before; nothing changed now)\n"} {
		code, out, stderr := run(t, "fleet", "resume", "pi1/slow", "--request-id", "r1", "--nats", url)
		if code != ExitOK || out != want {
			t.Fatalf("fleet resume (%d): exit %d: %q %s", i+1, code, out, stderr)
		}
	}
	waitStatus(t, pi1, "slow", statefmt.StatusCompleted)
	_, events, _ := run(t, "--store", pi1, "events", "slow", "--json")
	if n := strings.Count(events, `"to":"paused"`); n != 1 {
		t.Fatalf("the device paused slow %d times, want 1:\n%s", n, events)
	}
	// --follow printed every event up to the end, as the device prints them, until interrupted.
	_, local, _ := run(t, "--store", pi1, "events", "slow")
	for deadline := time.Now().Add(60 * time.Second); readFile(t, followed) != local; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fleet events --follow printed:\n%s\nthe device:\n%s", readFile(t, followed), local)
		}
	}
	if err := follow.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := follow.Wait(); err != nil {
		t.Fatalf("fleet events --follow, interrupted: %v", err)
	}

	// Mistakes: the local command's error and exit code, nothing changed.
	before := readFile(t, filepath.Join(pi2, fleet.RequestsFile))
	_, stateBefore, _ := run(t, "--store", pi2, "show", "gated", "--json")
	for _, c := range []struct {
		args  []string
		local []string // the same request on the device, when it has one
		code  int
		want  string
	}{
		{[]string{"fleet", "pause", "gone/slow", "--timeout", "1s"}, nil, ExitError, "device gone does not answer"},
		{[]string{"fleet", "pause", "pi2/nothing"}, []string{"pause", "nothing"}, ExitError, "nothing"},
		{[]string{"fleet", "tell", "pi2/nothing", "hello"}, []string{"tell", "nothing", "hello"}, ExitError, "nothing"},
		{[]string{"fleet", "tell", "pi2/gated", "  "}, []string{"tell", "gated", "  "}, ExitUsage, "the message is empty"},
		{[]string{"fleet", "tell", "pi2/gated", "hello"}, []string{"tell", "gated", "hello"}, ExitError, "has no command agent"},
		{[]string{"fleet", "tell", "pi2/web", "too late"}, []string{"tell", "web", "too late"}, ExitError, "harness web has completed"},
		{[]string{"fleet", "resume", "pi2/gated"}, []string{"resume", "gated"}, ExitWaiting, "harness gated is paused"},
		{[]string{"fleet", "resume", "pi2/bad..id"}, nil, ExitError, "bad..id"},
		{[]string{"fleet", "pause", "nodevice"}, nil, ExitUsage, "name a harness as DEVICE/ID"},
	} {
		code, out, stderr := run(t, append(c.args, "--nats", url)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d (want %d): %s%s", c.args, code, c.code, out, stderr)
		}
		if c.local != nil {
			lcode, _, lerr := run(t, append([]string{"--store", pi2}, c.local...)...)
			// The device's own error, named as the device's.
			first := func(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }
			remote := strings.Replace(first(stderr), "harness-edge: device pi2: ", "harness-edge: ", 1)
			if lcode != code || first(lerr) != remote {
				t.Errorf("%v: the fleet says %d %q, the device %d %q", c.args, code, stderr, lcode, lerr)
			}
		}
	}
	if after := readFile(t, filepath.Join(pi2, fleet.RequestsFile)); after != before {
		t.Errorf("refused requests were logged as applied:\n%s", strings.TrimPrefix(after, before))
	}
	if _, stateAfter, _ := run(t, "--store", pi2, "show", "gated", "--json"); stateAfter != stateBefore {
		t.Errorf("a refused request changed pi2/gated")
	}
	if entries, _ := os.ReadDir(filepath.Join(pi2, "inbox", "gated")); len(entries) != 0 {
		t.Errorf("a refused tell left %d messages", len(entries))
	}
}
