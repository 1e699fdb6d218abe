package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// taskOfSize is src with a prompt that brings it to exactly size bytes, made of the characters
// JSON escapes (quotes, backslashes, <, > and &): the file grows most when it is sent as JSON.
func taskOfSize(t *testing.T, src string, size int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(src + "prompt: |\n")
	line := "  " + strings.Repeat(`"<&>\`, 15) + "\n"
	for b.Len()+len(line) <= size {
		b.WriteString(line)
	}
	if rest := size - b.Len(); rest > 0 {
		b.WriteString("#" + strings.Repeat("x", rest-1)) // a comment to the exact size
	}
	if b.Len() != size {
		t.Fatalf("the task file is %d bytes, want %d", b.Len(), size)
	}
	return b.String()
}

// TestSubmitOfATaskFileAtTheSizeLimitIsTakenAsRunTakesIt: submit takes every task file run
// takes. A task file at the size limit, written so that JSON escaping makes it more than four
// times as long, is run in the foreground on one store and submitted to a daemon on another,
// and completes on both; one byte more is refused by run and by submit with the same message,
// naming the file and the limit (not the API's request body), and the refused submit changes
// nothing.
func TestSubmitOfATaskFileAtTheSizeLimitIsTakenAsRunTakesIt(t *testing.T) {
	dir := t.TempDir()
	ws := mkdir(t, filepath.Join(dir, "ws"))
	at := writeTask(t, dir, "at.yaml", taskOfSize(t, daemonTask("big", ws, 1, "1ms", false), task.MaxFileSize))
	over := writeTask(t, dir, "over.yaml", taskOfSize(t, daemonTask("over", ws, 1, "1ms", false), task.MaxFileSize+1))
	want := over + ": the task file is 4194305 bytes, over the 4 MiB (4194304 bytes) a task file may be"

	direct := filepath.Join(dir, "direct")
	if code, out, stderr := run(t, "--store", direct, "run", at); code != ExitOK {
		t.Fatalf("run of a task file at the limit: exit %d: %s%s", code, out, stderr)
	}
	code, _, runErr := run(t, "--store", direct, "run", over)
	if code != ExitError || !strings.Contains(runErr, want) {
		t.Fatalf("run of a task file over the limit: exit %d: %s", code, runErr)
	}

	db := filepath.Join(dir, "store")
	startDaemon(t, db)
	if code, out, stderr := run(t, "--store", db, "submit", at); code != ExitOK || !strings.Contains(out, "submitted: harness big") {
		t.Fatalf("submit of a task file at the limit: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "big", statefmt.StatusCompleted)
	code, _, submitErr := run(t, "--store", db, "submit", over)
	if code != ExitError || submitErr != runErr || strings.Contains(submitErr, "request body") {
		t.Fatalf("submit of a task file over the limit: exit %d: %q; want run's refusal %q", code, submitErr, runErr)
	}
	if _, out, _ := run(t, "--store", db, "ls"); strings.Contains(out, "over") {
		t.Fatalf("a refused submit made a harness:\n%s", out)
	}
}

// TestALoopWhosePromptMakesATaskFileOverTheLimitIsRefusedAlikeEverywhere: the loop's task file
// carries its prompt, indented, or quoted with its control characters escaped (\x01: four
// bytes for one). A prompt at its own limit (1 MiB) of control characters makes a task file
// over the task-file limit (4 MiB); it is refused by loop, loop --print-task and submit --loop
// alike, saying so, and nothing is made.
func TestALoopWhosePromptMakesATaskFileOverTheLimitIsRefusedAlikeEverywhere(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	prompt := filepath.Join(dir, "PROMPT.md")
	if err := os.WriteFile(prompt, []byte(strings.Repeat("\x01", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"loop", "--prompt-file", prompt, "--workspace", ws, "--", "sh"},
		{"loop", "--prompt-file", prompt, "--workspace", ws, "--print-task", "--", "sh"},
		{"submit", "--loop", "--prompt-file", prompt, "--workspace", ws, "--", "sh"},
	} {
		code, out, stderr := run(t, append([]string{"--store", db}, args...)...)
		if code != ExitUsage || !strings.Contains(stderr, "the prompt (1048576 bytes) makes the loop's task file") ||
			!strings.Contains(stderr, "over the 4 MiB (4194304 bytes) a task file may be: shorten the prompt") || out != "" {
			t.Errorf("%v: exit %d: %s%s", args, code, out, stderr)
		}
	}
	if fileExists(db) {
		t.Fatal("a refused loop touched the store")
	}
}

// TestAPlanChangeOverTheLimitIsRefusedWholeNotCut: a plan change may be as large as a task file.
// One a byte over the limit (a skip, then a long comment) is refused from standard input and
// from a file alike, saying what, why and the limit, and the harness is unchanged: no prefix of
// it is applied. One at the limit whose change comes after a long comment is taken whole from
// standard input.
func TestAPlanChangeOverTheLimitIsRefusedWholeNotCut(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	if code, out, stderr := run(t, "--store", db, "run", writeTask(t, dir, "k.yaml", strings.ReplaceAll(gatedTask, "%s", "k"))); code != ExitWaiting {
		t.Fatalf("run: exit %d: %s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "--store", db, "reject", "k", "--reason", "not today"); code != ExitOK {
		t.Fatalf("reject: exit %d: %s%s", code, out, stderr)
	}
	before := storeState(t, db, "k")
	replan := func(stdin string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := MainWithInput(append([]string{"--store", db, "replan", "k"}, args...), strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}

	head := "skip: [ship]\n#"
	over := head + strings.Repeat("x", task.MaxFileSize+1-len(head)-1) + "\n"
	if len(over) != task.MaxFileSize+1 {
		t.Fatalf("the change is %d bytes", len(over))
	}
	const limit = "over the 4 MiB (4194304 bytes) a plan change may be, as a task file: split it into smaller changes"
	code, out, stderr := replan(over, "-")
	if code != ExitError || out != "" || !strings.Contains(stderr, "harness k is unchanged: standard input: the plan change is more than 4194304 bytes, "+limit) {
		t.Fatalf("replan of a change over the limit from standard input: exit %d: %s%s", code, out, stderr)
	}
	overFile := writeTask(t, dir, "over.yaml", over)
	code, out, stderr = replan("", overFile)
	if code != ExitError || out != "" || !strings.Contains(stderr, "harness k is unchanged: "+overFile+": the plan change is 4194305 bytes, "+limit) {
		t.Fatalf("replan of a change over the limit from a file: exit %d: %s%s", code, out, stderr)
	}
	if after := storeState(t, db, "k"); !sameState(before, after) {
		t.Fatal("a refused replan changed the harness")
	}

	tail := "\nskip: [ship]\n"
	at := "#" + strings.Repeat("x", task.MaxFileSize-1-len(tail)) + tail
	if code, out, stderr := replan(at, "-"); code != ExitOK || !strings.Contains(out, "replanned: skip ship") {
		t.Fatalf("replan of a change at the limit from standard input: exit %d: %s%s", code, out, stderr)
	}
}
