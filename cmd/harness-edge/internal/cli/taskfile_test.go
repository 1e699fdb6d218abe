package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binary runs the harness-edge command line in a child process on store, and returns its exit
// code and output.
func binary(t *testing.T, store string, args ...string) (int, string) {
	t.Helper()
	out, err := child(append([]string{"--store", store}, args...)...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	case err != nil:
		t.Fatal(err)
	}
	return 0, string(out)
}

// A zero duration is stored as written: a task with {sleep: 0ms} that waits at a gate is
// approved and resumed to completion (the stored task once lost the sleep and could not be
// read back).
func TestZeroSleepTaskApprovesAndResumes(t *testing.T) {
	dir := t.TempDir()
	taskFile := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(taskFile, []byte(`id: z
agent: MARS
autonomy: 3
workspace: ./ws
budget: {wallClock: 0s}
agents:
  MARS:
    driver: script
    script:
      plan:
        - {id: s1, description: wait no time, agent: MARS}
        - {id: s2, description: ship, agent: MARS, dependsOn: [s1], critical: true}
      steps:
        s1: [{sleep: 0ms}, {output: slept}]
        s2: [{sleep: "0"}, {output: shipped}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	for _, c := range []struct {
		code int
		want string
		args []string
	}{
		{ExitWaiting, "harness-edge approve z g1", []string{"run", taskFile}},
		{ExitOK, "gate g1 before step s2 approved", []string{"approve", "z"}},
		{ExitOK, "harness z: completed", []string{"resume", "z"}},
		{ExitOK, "shipped", []string{"show", "z"}},
	} {
		code, out := binary(t, store, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Fatalf("%v: exit %d (want %d), output lacks %q:\n%s", c.args, code, c.code, c.want, out)
		}
	}
}

// A misspelt agent command is refused by run before a harness exists, naming the field, the
// line and PATH; the same id then runs once the command is fixed.
func TestRunRefusesACommandNotOnPath(t *testing.T) {
	dir := t.TempDir()
	taskFile := filepath.Join(dir, "t.yaml")
	src := `id: c
agent: CODER
autonomy: 5
workspace: ./ws
agents:
  CODER:
    driver: command
    command: [%s, -c, "echo done"]
    maxIterations: 1
plan: [{id: s, description: do it, agent: CODER}]
`
	write := func(cmd string) {
		if err := os.WriteFile(taskFile, []byte(strings.Replace(src, "%s", cmd, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(dir, "store")
	write("shh-not-a-command")
	code, out := binary(t, store, "run", taskFile)
	if code != ExitError || !strings.Contains(out, `t.yaml:8: agents.CODER.command[0]: "shh-not-a-command" was not found on PATH`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if code, out := binary(t, store, "show", "c"); code == ExitOK {
		t.Fatalf("a harness was created:\n%s", out)
	}
	write("sh")
	if code, out := binary(t, store, "run", taskFile); code != ExitOK || !strings.Contains(out, "harness c: completed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
