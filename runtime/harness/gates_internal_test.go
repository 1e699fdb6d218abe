package harness

import (
	"fmt"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/statefmt"
)

// A resume refused because gates wait names ten of them and counts the rest.
func TestDescribeGatesNamesTenAndCountsTheRest(t *testing.T) {
	var gates []PendingGate
	for i := range 25 {
		gates = append(gates, PendingGate{HarnessID: fmt.Sprintf("p.s%d", i), Gate: statefmt.Gate{ID: "g1", Kind: GateStep, StepID: "ship"}})
	}
	got := describeGates(gates)
	if strings.Count(got, "gate g1 of") != 10 || !strings.HasPrefix(got, "gate g1 of p.s0 before step ship; ") || strings.Contains(got, "p.s10 ") || !strings.HasSuffix(got, " and 15 more pending gates") {
		t.Fatalf("%d bytes: %s", len(got), got)
	}
}

// Every gate kind is named in a message by what it waits on, in words: no "(step, step ship)".
func TestEveryGateKindIsDescribedInWords(t *testing.T) {
	for _, c := range []struct{ kind, step, want string }{
		{GateStep, "ship", "gate g1 before step ship"},
		{GateBudget + ":toolCalls", "ship", "gate g1 on the tool-call budget at step ship"},
		{GateBudget + ":tokens", "ship", "gate g1 on the token budget at step ship"},
		{GateBudget + ":wallClock", "ship", "gate g1 on the wall-clock budget at step ship"},
		{GateBudget + ":costUSD", "ship", "gate g1 on the cost budget at step ship"},
		{GateReplay, "ship", "gate g1 on running a call of step ship again"},
		{GateReplan, "ship", "gate g1 on the replan at step ship"},
		{GateBudget + ":tokens", "", "gate g1 on the token budget"},
		{"", "ship", "gate g1 at step ship"},
		{"", "", "gate g1"},
		{"custom", "ship", "gate g1 (custom) at step ship"},
	} {
		if got := DescribeGate("g1", c.kind, c.step); got != c.want {
			t.Errorf("kind %q, step %q: %q, want %q", c.kind, c.step, got, c.want)
		}
	}
	// Each budget's kind is one the harness opens (agent.Budget's names).
	for _, b := range []agent.Budget{agent.BudgetToolCalls, agent.BudgetTokens, agent.BudgetWallClock, agent.BudgetCost} {
		if got := GateOn(GateBudget+":"+b.String(), "s"); strings.Contains(got, b.String()) {
			t.Errorf("budget %s is named %q", b, got)
		}
	}
}
