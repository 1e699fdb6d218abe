package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
)

// manyDepsPlan is a plan whose last step depends on n others.
func manyDepsPlan(n int) *statefmt.ExecutionPlan {
	p := &statefmt.ExecutionPlan{TaskID: "t"}
	var deps []string
	for i := range n {
		id := fmt.Sprintf("s%d", i+1)
		deps = append(deps, id)
		p.Steps = append(p.Steps, statefmt.ExecutionStep{ID: id, AssignedAgent: "A", Status: statefmt.StepPending})
	}
	p.Steps = append(p.Steps, statefmt.ExecutionStep{ID: "last", AssignedAgent: "A", Status: statefmt.StepBlocked, Dependencies: deps})
	return p
}

// rowOf is the table row of the step named id.
func rowOf(t *testing.T, out, id string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == id {
			return l
		}
	}
	t.Fatalf("no row for %s in:\n%s", id, out)
	return ""
}

func TestPlanAndShowTablesNameTenDependenciesAndCountTheRest(t *testing.T) {
	p := manyDepsPlan(5000)
	var plan, show bytes.Buffer
	printPlan(&plan, "h", p)
	printState(&show, &statefmt.HarnessState{HarnessID: "h", Status: statefmt.StatusFailed, Plan: p, CreatedAt: time.Now(), UpdatedAt: time.Now()})
	for name, out := range map[string]string{"plan": plan.String(), "show": show.String()} {
		row := rowOf(t, out, "last")
		if !strings.Contains(row, "s1,s2,s3,s4,s5,s6,s7,s8,s9,s10 and 4,990 more") || strings.Contains(row, "s11") {
			t.Errorf("%s: the row of a step with 5,000 dependencies does not name ten and count the rest:\n%.300s", name, row)
		}
	}
}

func TestShowsResultIsTheFirstLineThatIsNotBlank(t *testing.T) {
	str := func(s string) *string { return &s }
	st := &statefmt.HarnessState{HarnessID: "h", Status: statefmt.StatusCompleted, CreatedAt: time.Now(), UpdatedAt: time.Now(),
		Plan: &statefmt.ExecutionPlan{Steps: []statefmt.ExecutionStep{
			{ID: "blank", AssignedAgent: "A", Status: statefmt.StepCompleted, Output: str("\n\n  \r\nthe answer\nmore")},
			{ID: "one", AssignedAgent: "A", Status: statefmt.StepCompleted, Output: str("only line\n\n")},
			{ID: "err", AssignedAgent: "A", Status: statefmt.StepFailed, Error: str("\nboom\n")},
		}},
		SubAgentIDs:     []string{"h.sub"},
		SubAgentResults: map[string]statefmt.SubAgentResult{"h.sub": {AgentName: "B", StepID: "blank", Status: statefmt.StatusCompleted, Output: str("\n\nsub answer\nmore")}},
	}
	var b bytes.Buffer
	printState(&b, st)
	out := b.String()
	for id, want := range map[string]string{"blank": "the answer ...", "one": "only line", "err": "boom", "h.sub": "sub answer ..."} {
		if row := rowOf(t, out, id); !strings.HasSuffix(row, "  "+want) {
			t.Errorf("the RESULT of %s: %q, want it to end %q", id, row, want)
		}
	}
}

func TestShowsGatesSayWhatAPendingGateWaitsOn(t *testing.T) {
	st := &statefmt.HarnessState{HarnessID: "h", Status: statefmt.StatusPaused, CreatedAt: time.Now(), UpdatedAt: time.Now(),
		Gates: []statefmt.Gate{
			{ID: "g1", StepID: "ship", Status: statefmt.GateRejected, Kind: "step", Reason: "not on a Friday"},
			{ID: "g2", StepID: "ship", Status: statefmt.GatePending, Kind: "step"},
			{ID: "g3", StepID: "objective", Status: statefmt.GatePending, Kind: "budget:cost"},
		}}
	var b bytes.Buffer
	printState(&b, st)
	out := b.String()
	for id, want := range map[string]string{
		"g1": "not on a Friday",
		"g2": "gate g2 before step ship waits for a human",
		"g3": "gate g3 on the cost budget at step objective waits for a human",
	} {
		if row := rowOf(t, out, id); !strings.HasSuffix(row, "  "+want) {
			t.Errorf("the REASON of %s: %q, want it to end %q", id, row, want)
		}
	}
}

func TestCountsOfOneAreSingular(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{plural(1, "record"), "1 record"},
		{plural(0, "record"), "0 records"},
		{plural(1, "harness"), "1 harness"},
		{plural(2, "harness"), "2 harnesses"},
		{plural(int64(1), "token"), "1 token"},
		{plural(uint64(3), "tool call"), "3 tool calls"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	var b bytes.Buffer
	printState(&b, &statefmt.HarnessState{HarnessID: "h", Status: statefmt.StatusCompleted, TotalToolCalls: 1, Iterations: 1, CheckpointCount: 1})
	if want := "counts   1 tool call, 1 iteration, 1 checkpoint (last never)"; !strings.Contains(b.String(), want) {
		t.Errorf("show:\n%s\nwant %q", b.String(), want)
	}
	out := summary(harness.TaskOutput{HarnessID: "h", Status: statefmt.StatusCompleted, ToolCalls: 1, Checkpoints: 1}, 10)
	if want := "steps 0/0 completed, 1 tool call, 1 checkpoint, 10 bytes stored"; !strings.Contains(out, want) {
		t.Errorf("run's summary:\n%s\nwant %q", out, want)
	}
	b.Reset()
	printRemoved(&b, control.DeleteResult{Harnesses: []control.Removed{{ID: "a", SubAgents: []string{"a.s1"}}}})
	if want := "with 1 sub-agent (a.s1)"; !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "1 harness deleted") {
		t.Errorf("prune:\n%s\nwant %q and %q", b.String(), want, "1 harness deleted")
	}
}

// show and report print at most cellMax bytes of a reason, an error or a one-line output (a
// rejection's reason may be 64 KiB), on one line, cut at a character and saying how long it is.
func TestShowAndReportClipLongReasonsAndResults(t *testing.T) {
	long := strings.Repeat("é", 40<<10) // 80 KiB: cut inside a character unless cut with care
	multi := "first line\n" + strings.Repeat("x", 70<<10)
	st := &statefmt.HarnessState{HarnessID: "h", Status: statefmt.StatusPaused, StatusReason: long, CreatedAt: time.Now(), UpdatedAt: time.Now(),
		Gates: []statefmt.Gate{{ID: "g1", StepID: "s1", Status: statefmt.GateRejected, Kind: "step", Reason: multi}},
		Plan:  &statefmt.ExecutionPlan{Steps: []statefmt.ExecutionStep{{ID: "s1", AssignedAgent: "A", Status: statefmt.StepCompleted, Output: &long}}}}
	show, report := showAndReport(st, control.ReportEntry{ID: "h", Status: statefmt.StatusPaused, Reason: multi, Failures: []string{long}},
		control.DamagedHarness{ID: "d", Reason: long})
	want := fmt.Sprintf("... (%d bytes in all)", len(long))
	for name, out := range map[string]string{"show": show, "report": report} {
		if len(out) > 3000 || !utf8.ValidString(out) || !strings.Contains(out, want) {
			t.Errorf("%s printed %d bytes (valid UTF-8: %v), want at most 3000 and %q:\n%.500s", name, len(out), utf8.ValidString(out), want, out)
		}
	}
	if row := rowOf(t, show, "g1"); !strings.Contains(row, `first line\nxxx`) || !strings.HasSuffix(row, fmt.Sprintf("(%d bytes in all)", len(multi))) {
		t.Errorf("the gate's reason: %q", row)
	}
}

// A long first line of a longer output (or error) is cut saying the length of all of it, not of
// the line: "in all" is what --json holds.
func TestClippedFirstLineSaysTheWholeLength(t *testing.T) {
	out := strings.Repeat("L", 1000) + "\n" + strings.Repeat("M", 100_000)
	st := &statefmt.HarnessState{HarnessID: "h", Status: statefmt.StatusFailed, CreatedAt: time.Now(), UpdatedAt: time.Now(),
		Plan: &statefmt.ExecutionPlan{Steps: []statefmt.ExecutionStep{{ID: "s1", AssignedAgent: "A", Status: statefmt.StepCompleted, Output: &out}}}}
	show, report := showAndReport(st, control.ReportEntry{ID: "h", Status: statefmt.StatusFailed, Failures: []string{out}})
	want := fmt.Sprintf("... (%d bytes in all)", len(out))
	if row := rowOf(t, show, "s1"); !strings.HasSuffix(row, want) {
		t.Errorf("show: %q, want it to end in %q", row, want)
	}
	if !strings.Contains(report, want) || strings.Contains(report, "(1000 bytes") || strings.Contains(report, "(1004 bytes") {
		t.Errorf("report:\n%s\nwant %q", report, want)
	}
}

// A tab in a reason, an error or a result shows as \t: printed as it is, a table takes it for
// the end of a cell and moves the columns of the rows around it.
func TestTabsInReasonsKeepTheTablesColumns(t *testing.T) {
	reason := "col one\tcol two, a longer text than any column of the table\tthree"
	st := &statefmt.HarnessState{HarnessID: "h", Status: statefmt.StatusPaused, StatusReason: reason, CreatedAt: time.Now(), UpdatedAt: time.Now(),
		Gates: []statefmt.Gate{{ID: "g1", StepID: "s1", Status: statefmt.GateRejected, Kind: "step", Reason: reason}},
		Plan:  &statefmt.ExecutionPlan{Steps: []statefmt.ExecutionStep{{ID: "s1", AssignedAgent: "A", Status: statefmt.StepFailed, Error: &reason}}}}
	show, report := showAndReport(st, control.ReportEntry{ID: "h", Agent: "A", Status: statefmt.StatusPaused, Reason: reason, Failures: []string{reason}})
	for name, out := range map[string]string{"show": show, "report": report} {
		if strings.Contains(out, "col one ") || !strings.Contains(out, `col one\tcol two`) {
			t.Errorf("%s:\n%s\nwant the tabs as \\t", name, out)
		}
	}
	if row := rowOf(t, report, "h"); strings.Contains(row, "h    ") {
		t.Errorf("report: the harness's row is pushed apart: %q", row)
	}
}

// showAndReport is what show prints of st, and report of a store holding e (and damaged).
func showAndReport(st *statefmt.HarnessState, e control.ReportEntry, damaged ...control.DamagedHarness) (show, report string) {
	var b, r bytes.Buffer
	printState(&b, st)
	printReport(&r, &control.Report{Counts: map[statefmt.Status]int{e.Status: 1}, Harnesses: []control.ReportEntry{e}, Damaged: damaged}, 0)
	return b.String(), r.String()
}
