package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
)

// familyTask: a harness whose step p1 is delegated to a sub-agent of agent C, which has a plan
// of n steps of its own; each step of either appends its id to the workspace's steps.log (with
// bash) and answers "out-ID", so a step run twice shows as a line twice.
func familyTask(id, ws string, n int, sleep string) string {
	step := func(sid string) string {
		return fmt.Sprintf("          %s:\n            - {sleep: %s}\n            - {tool: bash, args: {command: \"echo %s >> steps.log\"}}\n            - {output: out-%s}\n", sid, sleep, sid, sid)
	}
	var plan, steps strings.Builder
	for i := range n {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("c%d", i-1)
		}
		fmt.Fprintf(&plan, "          - {id: c%d, description: sub step %d, agent: C, dependsOn: [%s]}\n", i, i, dep)
		steps.WriteString(step(fmt.Sprintf("c%d", i)))
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
      steps:
%s%s  C:
    driver: script
    tools: [bash]
    script:
      plan:
%s      steps:
%s
plan:
  - {id: p0, description: owner starts, agent: A}
  - {id: p1, description: the sub-agent's work, agent: C, dependsOn: [p0]}
  - {id: p2, description: owner wraps up, agent: A, dependsOn: [p1]}
`, id, ws, step("p0"), step("p2"), plan.String(), steps.String())
}

// TestFleetAdoptMovesAKilledDevicesFamily runs a hub and two daemons as processes. Device a runs
// a harness whose middle step is delegated to a sub-agent with a plan of its own, and is killed
// with SIGKILL while the sub-agent is in the middle of it. Adopting the sub-agent alone is
// refused, naming its parent, and changes nothing; `fleet adopt a/fam --to b` moves the whole
// family to b, which completes it: every step of either the hub had acknowledged keeps its
// output and is not run again. Restarted, a runs no member of the family.
func TestFleetAdoptMovesAKilledDevicesFamily(t *testing.T) {
	dir := t.TempDir()
	url := startHub(t, filepath.Join(dir, "hub"))
	ws := filepath.Join(dir, "ws")
	dbs := map[string]string{"a": filepath.Join(dir, "a"), "b": filepath.Join(dir, "b")}
	da := startDaemon(t, dbs["a"], "--nats", url, "--device", "a")
	startDaemon(t, dbs["b"], "--nats", url, "--device", "b")
	const subSteps = 8
	if code, out, stderr := run(t, "--store", dbs["a"], "submit", writeTask(t, dir, "fam.yaml", familyTask("fam", ws, subSteps, "250ms"))); code != ExitOK {
		t.Fatalf("submit on a: exit %d: %s%s", code, out, stderr)
	}
	js := hubStream(t, url)
	ctx := context.Background()
	// The hub holds the sub-agent with some of its steps done.
	var sub string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, err := fleet.Show(ctx, js, nil, "a", "fam"); err == nil && len(s.State.SubAgentIDs) == 1 {
			sub = s.State.SubAgentIDs[0]
			if c, err := fleet.Show(ctx, js, nil, "a", sub); err == nil && c.State.Plan != nil && len(c.State.Plan.Steps) == subSteps && c.State.Plan.Steps[2].Status == statefmt.StepCompleted {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub never held a's sub-agent three steps in")
		}
	}
	if err := da.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-da.exited
	// What the hub acknowledged of the family before a died.
	stable := func(id string) *fleet.Shown {
		var acked *fleet.Shown
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s, err := fleet.Show(ctx, js, nil, "a", id)
			if err != nil {
				t.Fatal(err)
			}
			if acked != nil && s.Entry.HeadSeq == acked.Entry.HeadSeq {
				return s
			}
			if acked = s; time.Now().After(deadline) {
				t.Fatalf("the hub's copy of a's %s kept changing after a died", id)
			}
		}
	}
	root, child := stable("fam"), stable(sub)
	done := map[string]string{}
	for _, s := range []*fleet.Shown{root, child} {
		for _, st := range s.State.Plan.Steps {
			if st.Status == statefmt.StepCompleted {
				done[st.ID] = *st.Output
			}
		}
	}
	if _, ok := done["p0"]; !ok || len(done) < 4 || child.State.Status == statefmt.StatusCompleted {
		t.Fatalf("a died with steps %v acknowledged and the sub-agent %s: the test needs it in the middle of the sub-agent", done, child.State.Status)
	}
	t.Logf("a died with %d steps acknowledged by the hub (sub-agent %s); steps.log: %v", len(done), sub, stepLines(t, ws))

	// The sub-agent alone: refused, naming its parent; nothing changed.
	code, out, stderr := run(t, "fleet", "adopt", "a/"+sub, "--to", "b", "--nats", url)
	if code != ExitError || !strings.Contains(stderr, "is a sub-agent of fam: adopt a/fam") {
		t.Fatalf("adopting the sub-agent alone: exit %d: %s%s", code, out, stderr)
	}
	t.Logf("adopting the sub-agent alone: refused: %s", strings.TrimSpace(stderr))
	for _, s := range []*fleet.Shown{root, child} {
		if f := fenceOf(t, js, s.Entry); f != nil {
			t.Fatalf("the fence of %s moved: %+v", s.Entry.ID, f)
		}
		if c, _, _ := run(t, "--store", dbs["b"], "show", s.Entry.ID); c == ExitOK {
			t.Fatalf("b holds %s after a refused adoption", s.Entry.ID)
		}
	}

	// The family, adopted on b.
	code, out, stderr = run(t, "fleet", "adopt", "a/fam", "--to", "b", "--request-id", "move-fam", "--nats", url)
	if code != ExitOK || !strings.Contains(out, "a/fam adopted by b: ") || !strings.Contains(out, "its sub-agents moved with it: "+sub) {
		t.Fatalf("fleet adopt: exit %d: %s%s", code, out, stderr)
	}
	t.Logf("fleet adopt: %s", out)
	if f := fenceOf(t, js, root.Entry); f == nil || f.Owner != "b" || f.Request != "move-fam" {
		t.Fatalf("the fence after the adoption: %+v", f)
	}
	final := waitStatus(t, dbs["b"], "fam", statefmt.StatusCompleted)
	finalSub := waitStatus(t, dbs["b"], sub, statefmt.StatusCompleted)
	lines := stepLines(t, ws)
	for _, st := range append(final.Plan.Steps, finalSub.Plan.Steps...) {
		if st.Status != statefmt.StepCompleted || st.Output == nil || (st.ID != "p1" && *st.Output != "out-"+st.ID) {
			t.Fatalf("step %s on b: %s %v", st.ID, st.Status, st.Output)
		}
		if out, ok := done[st.ID]; ok && st.ID != "p1" && (lines[st.ID] != 1 || out != *st.Output) {
			t.Fatalf("step %s, acknowledged before a died with output %q, ran %d times; b says %q", st.ID, out, lines[st.ID], *st.Output)
		}
		if st.ID != "p1" && lines[st.ID] < 1 {
			t.Fatalf("step %s never ran: %v", st.ID, lines)
		}
	}
	if len(finalSub.Plan.Steps) != subSteps {
		t.Fatalf("the sub-agent on b has %d steps, want %d", len(finalSub.Plan.Steps), subSteps)
	}
	t.Logf("steps.log after b completed the family: %v", lines)

	// a comes back: it runs no member of the family.
	_, subBefore, _ := run(t, "--store", dbs["a"], "show", sub, "--json")
	startDaemon(t, dbs["a"], "--nats", url, "--device", "a")
	st := waitStatus(t, dbs["a"], "fam", statefmt.StatusPaused)
	if !strings.Contains(st.StatusReason, "adopted by device b (request move-fam") {
		t.Fatalf("a's harness is paused for %q", st.StatusReason)
	}
	time.Sleep(2 * time.Second)
	if now := stepLines(t, ws); fmt.Sprint(now) != fmt.Sprint(lines) {
		t.Fatalf("a ran steps after it came back: %v, then %v", lines, now)
	}
	if _, subNow, _ := run(t, "--store", dbs["a"], "show", sub, "--json"); subNow != subBefore {
		t.Fatalf("a's sub-agent changed after a came back:\n%s\nthen\n%s", subBefore, subNow)
	}
	if code, out, stderr := run(t, "--store", dbs["a"], "resume", sub); code == ExitOK {
		t.Fatalf("resume of the sub-agent on a: exit %d: %s%s", code, out, stderr)
	}
}
