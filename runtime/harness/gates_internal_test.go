package harness

import (
	"fmt"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
)

// A resume refused because gates wait names ten of them and counts the rest.
func TestDescribeGatesNamesTenAndCountsTheRest(t *testing.T) {
	var gates []PendingGate
	for i := range 25 {
		gates = append(gates, PendingGate{HarnessID: fmt.Sprintf("p.s%d", i), Gate: statefmt.Gate{ID: "g1", Kind: GateStep, StepID: "ship"}})
	}
	got := describeGates(gates)
	if strings.Count(got, "gate g1 of") != 10 || strings.Contains(got, "p.s10 ") || !strings.HasSuffix(got, " and 15 more pending gates") {
		t.Fatalf("%d bytes: %s", len(got), got)
	}
}
