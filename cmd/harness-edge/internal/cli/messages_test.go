package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// TestRunOfAFinishedHarnessSaysItCannotBeResumed: running a task whose harness already
// completed is refused with what can be done with it, not with "resume it".
func TestRunOfAFinishedHarnessSaysItCannotBeResumed(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	f := writeTask(t, dir, "once.yaml", daemonTask("once", ws, 1, "1ms", false))
	if code, out, stderr := run(t, "--store", db, "run", f); code != ExitOK {
		t.Fatalf("run: exit %d: %s%s", code, out, stderr)
	}
	code, _, stderr := run(t, "--store", db, "run", f)
	if code != ExitError || !strings.Contains(stderr, "has completed, so it cannot be resumed") || strings.Contains(stderr, "resume it") {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	}
}

// TestEventsPrintsOneLinePerEvent: a multi-line message (an agent's feedback, a step's error)
// stays on its event's line of the table.
func TestEventsPrintsOneLinePerEvent(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	f := writeTask(t, dir, "ml.yaml", fmt.Sprintf(`id: ml
agent: A
workspace: %s
retry: {maxRetries: 2, base: 1ms}
agents:
  A:
    driver: script
    script:
      steps:
        "*":
          - {fail: transient, message: "first line\nsecond line\nthird line", times: 1}
          - {output: done}
plan:
  - {id: s1, description: flaky, agent: A}
`, filepath.Join(dir, "ws")))
	if code, out, stderr := run(t, "--store", db, "run", f); code != ExitOK {
		t.Fatalf("run: exit %d: %s%s", code, out, stderr)
	}
	_, js, _ := run(t, "--store", db, "events", "ml", "--json")
	code, out, stderr := run(t, "--store", db, "events", "ml")
	if code != ExitOK {
		t.Fatalf("events: exit %d: %s", code, stderr)
	}
	events, lines := strings.Count(js, "\n"), strings.Count(out, "\n")
	if events == 0 || lines != events || !strings.Contains(out, `first line\nsecond line\nthird line`) {
		t.Fatalf("%d events, %d lines:\n%s", events, lines, out)
	}
}

// TestJSONErrorsGoToStdoutAsJSON: with --json a failing command prints a JSON error object on
// stdout, with the exit code it returns; the message stays on stderr too.
func TestJSONErrorsGoToStdoutAsJSON(t *testing.T) {
	db := filepath.Join(t.TempDir(), "store")
	for _, args := range [][]string{{"show", "nope", "--json"}, {"report", "--json", "--since", "-1h"}} {
		code, out, stderr := run(t, append([]string{"--store", db}, args...)...)
		var e struct {
			Type     string `json:"type"`
			Error    string `json:"error"`
			ExitCode int    `json:"exitCode"`
		}
		if code == ExitOK || json.Unmarshal([]byte(out), &e) != nil || e.Type != "error" || e.Error == "" || e.ExitCode != code || !strings.Contains(stderr, e.Error) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	// Without --json, stdout stays empty.
	if code, out, _ := run(t, "--store", db, "show", "nope"); code != ExitError || out != "" {
		t.Errorf("show without --json: exit %d, stdout %q", code, out)
	}
}

// TestUsageMessages: a misspelt command gets a suggestion, and a missing argument a usage hint
// that names the command.
func TestUsageMessages(t *testing.T) {
	code, _, stderr := run(t, "shwo", "x")
	if code != ExitUsage || !strings.Contains(stderr, "Did you mean this?") || !strings.Contains(stderr, "\tshow") {
		t.Errorf("shwo: exit %d: %s", code, stderr)
	}
	code, _, stderr = run(t, "run")
	if code != ExitUsage || !strings.Contains(stderr, "see 'harness-edge run --help' for usage") || strings.Contains(stderr, "run 'harness-edge --help'") {
		t.Errorf("run without a task: exit %d: %s", code, stderr)
	}
}

// TestInvalidIDsSayTheRule: a harness id the store cannot hold is bad input, named with the
// rule, with or without a daemon (over HTTP: 400, not 404).
func TestInvalidIDsSayTheRule(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	if code, out, stderr := run(t, "--store", db, "run", writeTask(t, dir, "once.yaml", daemonTask("once", filepath.Join(dir, "ws"), 1, "1ms", false))); code != ExitOK {
		t.Fatalf("run: exit %d: %s%s", code, out, stderr)
	}
	for _, args := range [][]string{{"show", "a b"}, {"events", "x y"}, {"pause", "a/b"}, {"stop", "é"}} {
		code, _, stderr := run(t, append([]string{"--store", db}, args...)...)
		if code != ExitError || !strings.Contains(stderr, "is not valid: use 1-128 letters") {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, "http.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/harnesses/a%20b"}, {"POST", "/v1/harnesses/a%20b/pause"}, {"POST", "/v1/harnesses/-x/stop"},
		{"POST", "/v1/harnesses/-x/resume"}, {"POST", "/v1/harnesses/-x/approve"}, {"GET", "/v1/harnesses/-x/events"},
		{"GET", "/v1/verify?id=a%20b"}, {"POST", "/v1/harnesses/a%20b/bogus"}, {"GET", "/v1/harnesses/a%20b/x/y"},
		{"DELETE", "/v1/harnesses/-x"},
	} {
		code, resp := d.http(c.method, c.path, token, nil)
		if code != 400 || !strings.Contains(resp, "is not valid: use 1-128 letters") {
			t.Errorf("%s %s: %d %s", c.method, c.path, code, resp)
		}
	}
	// A task file above the limit: submit says the limit.
	big := writeTask(t, dir, "big.yaml", "id: big\n# "+strings.Repeat("x", task.MaxFileSize)+"\n")
	code, _, stderr := run(t, "--store", db, "submit", big)
	if code != ExitError || !strings.Contains(stderr, "over the 4 MiB (4194304 bytes) a task file may be") {
		t.Errorf("oversized submit: exit %d: %s", code, stderr)
	}
}

// TestReportNamesAFailedStepsErrorOnce: a harness that failed with its steps names them in its
// reason; the report does not list the same errors again among the failed steps, unless the
// reason was too long to show whole.
func TestReportNamesAFailedStepsErrorOnce(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	task := func(id, missing string) string {
		return fmt.Sprintf(`id: %s
agent: A
autonomy: 5
retry: {maxRetries: 0}
workspace: %s
agents:
  A:
    driver: script
    tools: [read_file]
    script:
      plan:
        - {id: a, description: read a file that is not there, agent: A}
        - {id: b, description: read another, agent: A}
      steps:
        a: [{tool: read_file, args: {path: nope.txt}}]
        b: [{tool: read_file, args: {path: %s}}]
`, id, filepath.Join(dir, "ws"), missing)
	}
	long := strings.Repeat("x", 400) + ".txt"
	for id, src := range map[string]string{"f": task("f", "gone.txt"), "g": task("g", long)} {
		if code, out, stderr := run(t, "--store", db, "run", writeTask(t, dir, id+".yaml", src)); code != ExitError {
			t.Fatalf("run %s: exit %d: %s%s", id, code, out, stderr)
		}
	}
	code, out, stderr := run(t, "--store", db, "report", "--since", "0")
	// Each harness's lines: its row (two spaces in) and the lines under it (four).
	of := func(id string) string {
		var b strings.Builder
		in := false
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "    ") {
				in = strings.HasPrefix(l, "  "+id+" ")
			}
			if in {
				b.WriteString(l + "\n")
			}
		}
		return b.String()
	}
	f, g := of("f"), of("g")
	if code != ExitOK || strings.Count(f, "nope.txt") != 1 || strings.Count(f, "gone.txt") != 1 || !strings.Contains(f, "step a failed: tool read_file:") {
		t.Fatalf("report: exit %d: %s%s", code, out, stderr)
	}
	// g's reason is cut at the table's width: its failed steps are listed under it.
	if !strings.Contains(g, "bytes in all)") || strings.Count(g, "nope.txt") != 2 {
		t.Fatalf("report of a harness whose reason is cut:\n%s", g)
	}
}
