package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// appendTask: a harness of n steps in a row; step sI appends "sI" to the workspace's file
// steps.log (with bash) and answers "out-sI", so a step run twice shows as a line twice.
func appendTask(id, ws string, n int, sleep string) string {
	var plan, steps strings.Builder
	for i := range n {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("s%d", i-1)
		}
		fmt.Fprintf(&plan, "        - {id: s%d, description: step %d, agent: A, dependsOn: [%s]}\n", i, i, dep)
		fmt.Fprintf(&steps, "        s%d:\n          - {sleep: %s}\n          - {tool: bash, args: {command: \"echo s%d >> steps.log\"}}\n          - {output: out-s%d}\n", i, sleep, i, i)
	}
	return fmt.Sprintf(`id: %s
agent: A
autonomy: 3
workspace: %s
agents:
  A:
    driver: script
    tools: [bash]
    script:
      plan:
%s      steps:
%s`, id, ws, plan.String(), steps.String())
}

// stepLines counts the lines of steps.log by step.
func stepLines(t *testing.T, ws string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, "steps.log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		n[l]++
	}
	return n
}

// fenceOf reads the fence entry of a harness of a device's store (nil: none).
func fenceOf(t *testing.T, js jetstream.JetStream, e store.IndexEntry) *fleet.Fence {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, fleet.FenceBucket)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet.ReadFence(ctx, kv, e)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// rewriteRecords replaces the records the hub holds of a device's harness with what edit
// makes of each (in the same order, with the same headers).
func rewriteRecords(t *testing.T, js jetstream.JetStream, device, id string, edit func(seq uint64, env []byte) []byte) {
	t.Helper()
	ctx := context.Background()
	recs, err := fleet.Records(ctx, js, device, id)
	if err != nil || len(recs) == 0 {
		t.Fatalf("records of %s/%s: %d, %v", device, id, len(recs), err)
	}
	s, err := js.Stream(ctx, fleet.StreamLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		raw, err := s.GetMsg(ctx, r.StreamSeq)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteMsg(ctx, r.StreamSeq); err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(raw.Subject)
		m.Header, m.Data = raw.Header, edit(r.Seq, r.Envelope)
		m.Header.Del(jetstream.MsgIDHeader) // else JetStream drops it as a duplicate
		if ack, err := js.PublishMsg(ctx, m); err != nil || ack.Duplicate {
			t.Fatalf("publishing record %d again: %v", r.Seq, err)
		}
	}
}

// TestFleetAdoptMovesAKilledDevicesHarness runs a hub and three daemons as processes. Device a
// runs a ten-step harness and is killed with SIGKILL in the middle of it; `fleet adopt a/job
// --to b` (sent twice with one request id, applied once) rebuilds it on b, which completes it:
// every step the hub had acknowledged keeps its output and is not run again. Restarted, a
// does not run it: it pauses it as adopted by b. Refused, each changing nothing: adopting
// while a's daemon is up, from records tampered with on the hub, onto a device (c) that holds
// a harness of that id, and without --to while two devices are up.
func TestFleetAdoptMovesAKilledDevicesHarness(t *testing.T) {
	dir := t.TempDir()
	url := startHub(t, filepath.Join(dir, "hub"))
	ws := filepath.Join(dir, "ws")
	dbs := map[string]string{"a": filepath.Join(dir, "a"), "b": filepath.Join(dir, "b"), "c": filepath.Join(dir, "c")}
	da := startDaemon(t, dbs["a"], "--nats", url, "--device", "a")
	startDaemon(t, dbs["b"], "--nats", url, "--device", "b")
	startDaemon(t, dbs["c"], "--nats", url, "--device", "c")
	const steps = 10
	if code, out, stderr := run(t, "--store", dbs["a"], "submit", writeTask(t, dir, "job.yaml", appendTask("job", ws, steps, "250ms"))); code != ExitOK {
		t.Fatalf("submit on a: exit %d: %s%s", code, out, stderr)
	}
	// c holds a harness of the same id, of its own.
	if code, out, stderr := run(t, "--store", dbs["c"], "submit", writeTask(t, dir, "c.yaml", daemonTask("job", filepath.Join(dir, "wsc"), 1, "1ms", false))); code != ExitOK {
		t.Fatalf("submit on c: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, dbs["c"], "job", statefmt.StatusCompleted)
	_, cBefore, _ := run(t, "--store", dbs["c"], "show", "job", "--json")

	js := hubStream(t, url)
	ctx := context.Background()
	// The hub holds a's harness with some steps done. Its first record may be the harness's
	// creation, before the owner agent has made the plan.
	var hubEntry store.IndexEntry
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, err := fleet.Show(ctx, js, nil, "a", "job"); err == nil && s.State.Plan != nil && len(s.State.Plan.Steps) == steps && s.State.Plan.Steps[3].Status == statefmt.StepCompleted {
			hubEntry = s.Entry
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub never held a's harness four steps in")
		}
	}
	refused := func(args []string, code int, want string) {
		t.Helper()
		c, out, stderr := run(t, append(args, "--nats", url)...)
		if c != code || !strings.Contains(stderr, want) {
			t.Fatalf("%v: exit %d (want %d, %q): %s%s", args, c, code, want, out, stderr)
		}
		t.Logf("%v: refused: %s", args, strings.TrimSpace(stderr))
		if f := fenceOf(t, js, hubEntry); f != nil {
			t.Fatalf("%v: the fence moved: %+v", args, f)
		}
		if c, _, _ := run(t, "--store", dbs["b"], "show", "job"); c == ExitOK {
			t.Fatalf("%v: b holds the harness", args)
		}
		if _, now, _ := run(t, "--store", dbs["c"], "show", "job", "--json"); now != cBefore {
			t.Fatalf("%v: c's harness changed", args)
		}
	}
	refused([]string{"fleet", "adopt", "a/job", "--to", "b"}, ExitError, "device a is online")
	refused([]string{"fleet", "adopt", "a/job"}, ExitUsage, "2 devices other than a are up")
	refused([]string{"fleet", "adopt", "a/job", "--to", "a"}, ExitUsage, "the harness is on a already")

	if err := da.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-da.exited
	// What the hub acknowledged of a's harness before it died.
	var acked *fleet.Shown
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, err := fleet.Show(ctx, js, nil, "a", "job")
		if err != nil {
			t.Fatal(err)
		}
		if acked != nil && s.Entry.HeadSeq == acked.Entry.HeadSeq {
			break
		}
		if acked = s; time.Now().After(deadline) {
			t.Fatal("the hub's copy of a's harness kept changing after a died")
		}
	}
	hubEntry = acked.Entry
	done := map[string]string{}
	for _, st := range acked.State.Plan.Steps {
		if st.Status == statefmt.StepCompleted {
			done[st.ID] = *st.Output
		}
	}
	if len(done) < 4 || len(done) == steps {
		t.Fatalf("a died with %d of %d steps acknowledged: the test needs it in the middle", len(done), steps)
	}
	t.Logf("a died with %d steps acknowledged by the hub; steps.log: %v", len(done), stepLines(t, ws))

	// A record tampered with on the hub: the chain does not verify.
	orig := map[uint64][]byte{}
	rewriteRecords(t, js, "a", "job", func(seq uint64, env []byte) []byte {
		orig[seq] = env
		if seq != hubEntry.HeadSeq {
			return env
		}
		env = append([]byte(nil), env...)
		env[len(env)-40] ^= 0x20
		return env
	})
	refused([]string{"fleet", "adopt", "a/job", "--to", "b"}, ExitError, "does not rebuild here")
	rewriteRecords(t, js, "a", "job", func(seq uint64, _ []byte) []byte { return orig[seq] })
	// c holds a harness of that id.
	refused([]string{"fleet", "adopt", "a/job", "--to", "c"}, ExitError, "device c already holds a harness job")

	// Adopted on b, once however often asked.
	for i, want := range []string{"a/job adopted by b: ", "(this request was applied before; nothing changed now)"} {
		code, out, stderr := run(t, "fleet", "adopt", "a/job", "--to", "b", "--request-id", "move-job", "--nats", url)
		if code != ExitOK || !strings.Contains(out, want) {
			t.Fatalf("fleet adopt (%d): exit %d, want %q: %s%s", i+1, code, want, out, stderr)
		}
		t.Logf("fleet adopt (%d): %s", i+1, out)
	}
	f := fenceOf(t, js, hubEntry)
	if f == nil || f.Owner != "b" || f.From != "a" || f.Request != "move-job" || f.Revision != 1 {
		t.Fatalf("the fence after the adoption: %+v", f)
	}
	final := waitStatus(t, dbs["b"], "job", statefmt.StatusCompleted)
	lines := stepLines(t, ws)
	for i, st := range final.Plan.Steps {
		id := fmt.Sprintf("s%d", i)
		if st.Status != statefmt.StepCompleted || st.Output == nil || *st.Output != "out-"+id {
			t.Fatalf("step %s on b: %s %v", id, st.Status, st.Output)
		}
		if out, ok := done[id]; ok && (lines[id] != 1 || out != *st.Output) {
			t.Fatalf("step %s, acknowledged before a died with output %q, ran %d times; b says %q", id, out, lines[id], *st.Output)
		}
		if lines[id] < 1 {
			t.Fatalf("step %s never ran: %v", id, lines)
		}
	}
	t.Logf("steps.log after b completed the harness: %v", lines)

	// a comes back: it does not run the harness, and says why.
	startDaemon(t, dbs["a"], "--nats", url, "--device", "a")
	st := waitStatus(t, dbs["a"], "job", statefmt.StatusPaused)
	if !strings.Contains(st.StatusReason, "adopted by device b (request move-job") {
		t.Fatalf("a's harness is paused for %q", st.StatusReason)
	}
	time.Sleep(2 * time.Second)
	if now := stepLines(t, ws); fmt.Sprint(now) != fmt.Sprint(lines) {
		t.Fatalf("a ran steps after it came back: %v, then %v", lines, now)
	}
	if code, out, _ := run(t, "--store", dbs["a"], "show", "job"); code != ExitOK || !strings.Contains(out, "adopted by device b") {
		t.Fatalf("show on a: exit %d:\n%s", code, out)
	}
	// The fence holds: a second adoption from a is refused now.
	refusedNow := func(args []string, want string) {
		t.Helper()
		code, out, stderr := run(t, append(args, "--nats", url)...)
		if code != ExitError || !strings.Contains(stderr, want) {
			t.Fatalf("%v: exit %d, want %q: %s%s", args, code, want, out, stderr)
		}
	}
	refusedNow([]string{"fleet", "adopt", "a/job", "--to", "b"}, "device b already holds a harness job")
	if f2 := fenceOf(t, js, hubEntry); f2.Revision != f.Revision || f2.Owner != "b" {
		t.Fatalf("the fence moved: %+v", f2)
	}
}
