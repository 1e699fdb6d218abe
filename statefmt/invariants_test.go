//go:build invariants

package statefmt_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Built with the invariants tag, an encoder told of some changed steps checks all the others:
// a step changed without a word is a bug of the caller, and it panics naming the step.
func TestEncoderToldTooLittlePanicsUnderInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := stategen.State(r, stategen.Small)
	for len(s.Plan.Steps) < 3 {
		s.Plan.Steps = append(s.Plan.Steps, statefmt.ExecutionStep{ID: stategen.String(r, stategen.Small) + "x", AssignedAgent: "a", Status: statefmt.StepPending, Dependencies: []string{}})
	}
	statefmt.Normalize(s)
	var enc statefmt.BinaryEncoder
	if _, err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	s.Plan.Steps[0].Attempts++
	s.Plan.Steps[2].Attempts++
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "plan step 2") || !strings.Contains(msg, "told only of steps [0]") {
			t.Fatalf("panic %q, want one naming step 2", msg)
		}
	}()
	_, _ = enc.EncodeChanged(s, statefmt.StepChanges{Known: true, Indexes: []int{0}})
	t.Fatal("a change the encoder was not told of went unnoticed")
}
