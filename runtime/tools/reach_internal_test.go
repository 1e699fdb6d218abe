package tools

import (
	"testing"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// Only the built-in readers stay inside the process; a reader the task turned into a command,
// or marked as having side effects, reaches outside like any other tool.
func TestOnlyTheBuiltinReadersStayInsideTheProcess(t *testing.T) {
	tk := &task.Task{Tools: map[string]*task.ToolConfig{
		"grep":   {Command: []string{"rg"}},
		"glob":   {SideEffects: true},
		"deploy": {Command: []string{"./deploy.sh"}},
	}}
	for name, want := range map[string]bool{
		"read_file": false, "git_status": false, "git_diff": false, "git_log": false,
		"grep": true, "glob": true, "deploy": true,
		"bash": true, "write_file": true, "edit_file": true, "git_commit": true,
	} {
		if got := reachesOutside(name, Settings(tk, name)); got != want {
			t.Errorf("%s: reaches outside %v, want %v", name, got, want)
		}
	}
	if reachesOutside("grep", Settings(&task.Task{}, "grep")) || reachesOutside("glob", Settings(&task.Task{}, "glob")) {
		t.Error("grep and glob as built in reach outside")
	}
}
