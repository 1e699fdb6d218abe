package cli

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSameAnswersThroughTheDaemonAndDirectly runs the same commands against two copies of a
// store, one owned by a daemon and one with no owner, and compares what they print and their
// exit codes. The one difference by design: approving a gate through the daemon also resumes
// the harness, and says so.
func TestSameAnswersThroughTheDaemonAndDirectly(t *testing.T) {
	dir := t.TempDir()
	direct, owned, ws := filepath.Join(dir, "direct"), filepath.Join(dir, "owned"), filepath.Join(dir, "ws")
	for _, id := range []string{"ga", "gb"} {
		f := writeTask(t, dir, id+".yaml", daemonTask(id, ws, 2, "1ms", true))
		if code, out, stderr := run(t, "--store", direct, "run", f); code != ExitWaiting {
			t.Fatalf("run %s: exit %d: %s%s", id, code, out, stderr)
		}
	}
	if out, err := exec.Command("cp", "-a", direct, owned).CombinedOutput(); err != nil {
		t.Fatalf("copying the store: %v %s", err, out)
	}
	startDaemon(t, owned)
	// What the clock and the encoder decide may differ between the copies: times, durations,
	// sizes, and so whether a checkpoint of a small state is a keyframe or a delta (a keyframe is
	// written when the deltas since the last one outgrow the state, a matter of a few bytes).
	times := regexp.MustCompile(`\d\d:\d\d:\d\d\.\d{3}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)|waited \d+\.\ds|\d+ B\b|\b(keyframe|delta)\b`)
	same := func(args ...string) {
		t.Helper()
		var got [2]string
		var codes [2]int
		for i, db := range []string{direct, owned} {
			code, out, stderr := run(t, append([]string{"--store", db}, args...)...)
			got[i], codes[i] = times.ReplaceAllString(out+"\n--- stderr\n"+stderr, "T"), code
		}
		if codes[0] != codes[1] || got[0] != got[1] {
			t.Errorf("%v:\ndirectly: exit %d\n%s\nthrough the daemon: exit %d\n%s", args, codes[0], got[0], codes[1], got[1])
		}
	}
	same("show", "ga")
	same("show", "ga", "--json")
	same("resume", "ga")
	same("resume", "ga", "--json")
	same("events", "ga")
	same("approve", "ga", "g9")
	same("reject", "ga", "g9", "--reason", "no")
	same("reject", "ga", "--reason", "not like this")
	same("show", "ga")
	same("approve", "ga")
	same("pause", "ga")
	same("stop", "ga")
	same("stop", "ga")
	same("pause", "ga")
	same("resume", "ga")
	same("events", "ga")
	for _, args := range [][]string{{"show", "nope"}, {"events", "nope"}, {"approve", "nope"}, {"pause", "nope"},
		{"stop", "nope"}, {"resume", "nope"}, {"show", "a b"}, {"reject", "gb"}, {"show", "nope", "--json"}} {
		same(args...)
	}
	// Approve: the same decision; the daemon then resumes the harness itself.
	var outs [2]string
	for i, db := range []string{direct, owned} {
		code, out, stderr := run(t, "--store", db, "approve", "gb")
		if code != ExitOK {
			t.Fatalf("approve gb: exit %d: %s%s", code, out, stderr)
		}
		outs[i] = out
	}
	decision := "harness gb: gate g1 before step s1 approved; "
	if !strings.HasPrefix(outs[0], decision+"continue with `harness-edge resume gb`") || !strings.HasPrefix(outs[1], decision+"the daemon (pid ") {
		t.Errorf("approve gb:\n%s%s", outs[0], outs[1])
	}
}
