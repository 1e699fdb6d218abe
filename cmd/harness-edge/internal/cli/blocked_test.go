package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A first step that fails (it reads a symbolic link out of the workspace) blocks the other 59
// steps of its chain: show, events and retry name ten of them and count the rest, and events
// --json still lists them all.
func TestALongChainsFailureNamesTenBlockedStepsInTheCommandsOutput(t *testing.T) {
	ws, store := t.TempDir(), t.TempDir()
	if err := os.Symlink("/etc/hostname", filepath.Join(ws, "outside")); err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for i := 1; i <= 60; i++ {
		dep := ""
		if i > 1 {
			dep = fmt.Sprintf(", dependsOn: [s%02d]", i-1)
		}
		fmt.Fprintf(&plan, "        - {id: s%02d, description: step %d, agent: A%s}\n", i, i, dep)
	}
	task := writeTask(t, t.TempDir(), "chain.yaml", `id: chain
agent: A
autonomy: 5
workspace: `+ws+`
agents:
  A:
    driver: script
    tools: [read_file]
    script:
      plan:
`+plan.String()+`      steps:
        s01: [{tool: read_file, args: {path: outside}}]
        "*": [{output: ok}]
`)
	code, out, errOut := run(t, "--store", store, "run", task)
	if code != ExitError {
		t.Fatalf("run: exit %d: %s%s", code, out, errOut)
	}
	const named = "s02, s03, s04, s05, s06, s07, s08, s09, s10, s11 and 49 more"
	if !strings.Contains(errOut, "step s01 failed: tool read_file: ") || !strings.Contains(errOut, "blocked: "+named) || strings.Contains(errOut, "s60") {
		t.Fatalf("run's error: %s", errOut)
	}
	_, out, _ = run(t, "--store", store, "show", "chain")
	if status, _, _ := strings.Cut(out[strings.Index(out, "status"):], "\n"); !strings.Contains(status, "blocked: "+named) || len(status) > 300 {
		t.Fatalf("show's status line (%d bytes): %s", len(status), status)
	}
	_, out, _ = run(t, "--store", store, "events", "chain")
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 300 || strings.Contains(line, "s60") {
			t.Fatalf("events line of %d bytes: %.400s", len(line), line)
		}
		if strings.Contains(line, "step_failed") && !strings.Contains(line, "blocked s02,s03,s04,s05,s06,s07,s08,s09,s10,s11 and 49 more") {
			t.Fatalf("step_failed line: %s", line)
		}
	}
	_, out, _ = run(t, "--store", store, "events", "--json", "chain")
	var all []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct {
			Type    string   `json:"type"`
			Blocked []string `json:"blocked"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events --json line %q: %v", line, err)
		}
		if ev.Type == "step_failed" {
			all = ev.Blocked
		}
	}
	if len(all) != 59 || all[58] != "s60" {
		t.Fatalf("events --json: step_failed lists %d blocked steps, want all 59", len(all))
	}
	code, out, errOut = run(t, "--store", store, "retry", "chain")
	if code != ExitOK || !strings.Contains(out, "unblocked "+named) || strings.Contains(out, "s60") {
		t.Fatalf("retry: exit %d: %s%s", code, out, errOut)
	}
}
