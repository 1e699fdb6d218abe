package task_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// sizedTask is a valid task file of exactly size bytes: a script task whose prompt is padded
// with characters that JSON escapes the most (quotes, backslashes, <, > and &).
func sizedTask(t *testing.T, size int) []byte {
	t.Helper()
	head := "id: big\nagent: S\nagents:\n  S: {driver: script, script: {steps: {\"*\": [{output: done}]}}}\nplan:\n  - {id: s0, description: one step, agent: S}\nprompt: |\n"
	line := "  " + strings.Repeat(`"<&>\`, 15) + "\n"
	var b strings.Builder
	b.WriteString(head)
	for b.Len()+len(line) <= size {
		b.WriteString(line)
	}
	if rest := size - b.Len(); rest > 0 {
		b.WriteString("#" + strings.Repeat("x", rest-1))
	}
	if b.Len() != size {
		t.Fatalf("the task file is %d bytes, want %d", b.Len(), size)
	}
	return []byte(b.String())
}

// TestATaskFileUpToTheLimitIsTakenAndOneByteMoreIsRefusedNamingTheFileAndTheLimit: a task file
// of exactly MaxFileSize loads and parses; one byte more is refused, by Load and by ParseAt
// alike, with a message that names the file, its size and the limit.
func TestATaskFileUpToTheLimitIsTakenAndOneByteMoreIsRefusedNamingTheFileAndTheLimit(t *testing.T) {
	dir := t.TempDir()
	at, over := filepath.Join(dir, "at.yaml"), filepath.Join(dir, "over.yaml")
	atData, overData := sizedTask(t, task.MaxFileSize), sizedTask(t, task.MaxFileSize+1)
	if err := os.WriteFile(at, atData, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, overData, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := task.Load(at); err != nil {
		t.Fatalf("a task file of %d bytes: %v", task.MaxFileSize, err)
	}
	if _, err := task.ParseAt("at.yaml", atData, dir); err != nil {
		t.Fatalf("a task file of %d bytes: %v", task.MaxFileSize, err)
	}
	want := "the task file is 4194305 bytes, over the 4 MiB (4194304 bytes) a task file may be"
	if _, err := task.Load(over); err == nil || err.Error() != over+": "+want {
		t.Fatalf("Load of a task file over the limit: %v", err)
	}
	if _, err := task.ParseAt("over.yaml", overData, dir); err == nil || err.Error() != "over.yaml: "+want {
		t.Fatalf("ParseAt of a task file over the limit: %v", err)
	}
	if data, err := task.ReadFile(over); err == nil || data != nil || err.Error() != over+": "+want {
		t.Fatalf("ReadFile of a task file over the limit: %d bytes, %v", len(data), err)
	}
	if data, err := task.ReadFile(at); err != nil || len(data) != task.MaxFileSize {
		t.Fatalf("ReadFile of a task file at the limit: %d bytes, %v", len(data), err)
	}
}

// TestAPlanChangeUpToTheLimitIsTakenAndOneByteMoreIsRefused: a plan change may be as large as a
// task file. ParsePlanChange (a replan through the daemon, or an owner agent's) takes one of
// exactly MaxFileSize and refuses one byte more, naming it and the limit; ReadPlanChange reads
// one at the limit whole, from a file and from standard input, and refuses one byte more from
// either without returning any of it.
func TestAPlanChangeUpToTheLimitIsTakenAndOneByteMoreIsRefused(t *testing.T) {
	current := []task.CurrentStep{{PlanStep: task.PlanStep{ID: "a", Description: "one step", Agent: "S"}}}
	agents := map[string]*task.Agent{"S": {Driver: "script"}}
	change := func(size int) []byte {
		head := "skip: [a]\n#"
		return []byte(head + strings.Repeat("x", size-len(head)-1) + "\n")
	}
	atData, overData := change(task.MaxFileSize), change(task.MaxFileSize+1)
	if c, _, err := task.ParsePlanChange("at.yaml", atData, current, agents); err != nil || len(c.Skip) != 1 {
		t.Fatalf("a plan change of %d bytes: %v", len(atData), err)
	}
	const limit = "over the 4 MiB (4194304 bytes) a plan change may be, as a task file: split it into smaller changes"
	if _, _, err := task.ParsePlanChange("over.yaml", overData, current, agents); err == nil || err.Error() != "over.yaml: the plan change is 4194305 bytes, "+limit {
		t.Fatalf("ParsePlanChange of a plan change over the limit: %v", err)
	}

	dir := t.TempDir()
	at, over := filepath.Join(dir, "at.yaml"), filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(at, atData, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, overData, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  string
		stdin []byte
		want  string
	}{
		{at, nil, ""},
		{"-", atData, ""},
		{over, nil, over + ": the plan change is 4194305 bytes, " + limit},
		{"-", overData, "standard input: the plan change is more than 4194304 bytes, " + limit},
	} {
		data, err := task.ReadPlanChange(c.path, bytes.NewReader(c.stdin))
		switch {
		case c.want == "" && (err != nil || !bytes.Equal(data, atData)):
			t.Errorf("ReadPlanChange(%s) of a change at the limit: %d bytes, %v", c.path, len(data), err)
		case c.want != "" && (err == nil || data != nil || err.Error() != c.want):
			t.Errorf("ReadPlanChange(%s) of a change over the limit: %d bytes, %v", c.path, len(data), err)
		}
	}
}
