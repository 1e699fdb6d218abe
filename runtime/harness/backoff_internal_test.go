package harness

import (
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// A step's retry waits grow by at least the factor from one attempt to the next, whatever the
// jitter, and the same harness and step always get the same waits.
func TestStepBackoffDoubles(t *testing.T) {
	six := 6
	h := &Harness{task: &task.Task{Retry: task.RetryConfig{MaxRetries: &six, Base: task.Duration{Duration: time.Second}, Factor: 2,
		MaxDelay: task.Duration{Duration: time.Hour}}}, st: &statefmt.HarnessState{HarnessID: "h"}}
	for _, step := range []string{"a", "b", "c", "d"} {
		prev := time.Duration(0)
		for attempt := 1; attempt <= 6; attempt++ {
			d := h.backoff(step, attempt)
			if attempt == 1 && (d < time.Second || d >= 1200*time.Millisecond) || attempt > 1 && d < 2*prev || d != h.backoff(step, attempt) {
				t.Fatalf("step %s attempt %d: %v after %v", step, attempt, d, prev)
			}
			prev = d
		}
	}
}
