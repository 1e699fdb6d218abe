package fuzz

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// FuzzTaskFile feeds arbitrary bytes to the task file parser, as `run` and the daemon's API
// take them: it may refuse them, never panic, and a task it accepts is stored (as JSON) in a form
// that reads back to the same task.
func FuzzTaskFile(f *testing.F) {
	f.Fuzz(func(t *testing.T, src []byte) {
		t1, err := task.Parse("fuzz.yaml", src)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		stored, err := json.Marshal(t1)
		if err != nil {
			t.Fatalf("an accepted task cannot be stored: %v", err)
		}
		t2, err := task.Parse("the stored task", stored)
		if err != nil {
			t.Fatalf("the stored task is refused: %v\n%s", err, stored)
		}
		if again, _ := json.Marshal(t2); !bytes.Equal(stored, again) {
			t.Fatalf("the task changed when read back:\n%s\n%s", stored, again)
		}
	})
}
