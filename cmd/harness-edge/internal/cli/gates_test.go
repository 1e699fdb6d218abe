package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The gate workflow from the command line: run stops at a critical step (exit 3) naming the
// gate; resume refuses while it waits; reject needs a reason and keeps the harness paused;
// resume asks again; approve, resume, done.
func TestGateWorkflowFromTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	taskFile := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(taskFile, []byte(`id: g
agent: A
autonomy: 3
workspace: ./ws
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      plan:
        - {id: prep, description: prepare, agent: A}
        - {id: ship, description: ship it, agent: A, dependsOn: [prep], critical: true}
      steps:
        prep: [{output: ready}]
        ship: [{tool: write_file, args: {path: shipped.txt, content: yes}}, {output: shipped}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	expect := func(wantCode int, want string, args ...string) string {
		t.Helper()
		code, stdout, stderr := run(t, append([]string{"--store", store}, args...)...)
		if code != wantCode || !strings.Contains(stdout+stderr, want) {
			t.Fatalf("%v: exit %d (want %d), output lacks %q:\n%s%s", args, code, wantCode, want, stdout, stderr)
		}
		return stdout + stderr
	}
	expect(ExitWaiting, "gate g1 before step ship waits for a human: `harness-edge approve g g1`", "run", taskFile)
	if _, err := os.Stat(filepath.Join(dir, "ws", "shipped.txt")); err == nil {
		t.Fatal("the gated step ran")
	}
	expect(ExitWaiting, "harness-edge approve g g1", "resume", "g")
	// The status reason names the gate as the other messages do.
	expect(ExitOK, `status   paused (waiting for a human: gate g1 before step ship: critical step ship ("ship it") needs approval at autonomy 3)`, "show", "g")
	expect(ExitOK, "g1    step  ship  pending", "show", "g")
	expect(ExitUsage, "reject needs --reason", "reject", "g")
	expect(ExitOK, "rejected: not on a Friday", "reject", "g", "--reason", "not on a Friday")
	expect(ExitOK, "gate g1 before step ship rejected: not on a Friday", "show", "g")
	expect(ExitWaiting, "gate g2 before step ship waits", "resume", "g")
	expect(ExitError, "no pending gate g9", "approve", "g", "g9")
	expect(ExitOK, "gate g2 before step ship approved", "approve", "g")
	expect(ExitOK, "status   paused (gate g2 before step ship approved: resume to continue)", "show", "g")
	expect(ExitOK, "harness g: completed", "resume", "g")
	events := expect(ExitOK, "waiting_for_human", "events", "g")
	if !strings.Contains(events, "gate g1 before step ship  rejected") || !strings.Contains(events, "gate g2 before step ship  approved") {
		t.Fatalf("events:\n%s", events)
	}
}
