package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/statefmt"
)

const toldText = "Use tabs, not spaces."

// startLoopUntil starts a loop in a child process and waits until the fake agent wrote marker.
func startLoopUntil(t *testing.T, args []string, ws, marker string) func(kill bool) {
	t.Helper()
	cmd := child(args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !fileExists(filepath.Join(ws, marker)) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("%s never appeared", marker)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return func(kill bool) {
		if kill {
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		_ = cmd.Wait()
	}
}

// tell reaches the next iteration's prompt, marked as from the human, and no other.
func TestTellReachesTheNextIterationOnce(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	release := filepath.Join(dir, "release")
	t.Setenv("FAKE_PAUSE_AT", "1")
	t.Setenv("FAKE_RELEASE", release)
	wait := startLoopUntil(t, loopArgs(t, db, ws, "told"), ws, "working.1")
	// Through the running loop's control socket, while iteration 1 runs (it waits for the
	// release file).
	code, out := binary(t, db, "tell", "told", toldText)
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code != ExitOK || !strings.Contains(out, "message stored") {
		wait(false)
		t.Fatalf("tell: exit %d\n%s", code, out)
	}
	wait(false)
	if st := storeState(t, db, "told"); st.Status != statefmt.StatusCompleted {
		t.Fatalf("status %s", st.Status)
	}
	prompts := readFile(t, filepath.Join(ws, "prompts.log"))
	if n := strings.Count(prompts, toldText); n != 1 {
		t.Fatalf("the message is in %d prompts, want 1:\n%s", n, prompts)
	}
	if p2 := readFile(t, filepath.Join(ws, "prompt.2")); !strings.Contains(p2, "[Message from the human, ") || !strings.Contains(p2, toldText) {
		t.Fatalf("iteration 2's prompt lacks the message:\n%s", p2)
	}
	// A finished harness takes no more messages; nothing is stored.
	code, out = binary(t, db, "tell", "told", "too late")
	if code != ExitError || !strings.Contains(out, "harness told has completed: no iteration will read the message") {
		t.Fatalf("tell after the end: exit %d\n%s", code, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(db, "inbox", "told")); len(entries) != 0 {
		t.Fatalf("the inbox holds %d files after delivery", len(entries))
	}
}

// A message told just before a SIGKILL reaches the iteration that runs after the resume, once;
// and one taken by an iteration that is then killed reaches that iteration's re-run, and no
// later one.
func TestTellSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	t.Setenv("FAKE_PAUSE_AT", "1 2")
	t.Setenv("FAKE_PAUSE", "30")
	stop := startLoopUntil(t, loopArgs(t, db, ws, "killed"), ws, "working.1")
	if code, out := binary(t, db, "tell", "killed", toldText); code != ExitOK {
		t.Fatalf("tell: exit %d\n%s", code, out)
	}
	stop(true) // between tell and the iteration that will carry it
	os.Remove(filepath.Join(ws, "working.1"))
	t.Setenv("FAKE_PAUSE_AT", "2")
	stop = startLoopUntil(t, []string{"--store", db, "resume", "killed"}, ws, "working.2")
	stop(true) // iteration 2, which does not carry it, is cut short
	t.Setenv("FAKE_PAUSE_AT", "")
	if code, out := binary(t, db, "resume", "killed"); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if runs := readFile(t, filepath.Join(ws, "runs.log")); runs != "started 1\nstarted 1\nstarted 2\nstarted 2\nstarted 3\n" {
		t.Fatalf("runs.log %q", runs)
	}
	prompts := strings.Split(readFile(t, filepath.Join(ws, "prompts.log")), "\n=====\n")
	var with []int
	for i, p := range prompts {
		if strings.Contains(p, toldText) {
			with = append(with, i)
		}
	}
	// Runs: 1 (before tell), 1 again (carries it), 2, 2 again, 3.
	if len(with) != 1 || with[0] != 1 {
		t.Fatalf("the message is in runs %v, want only the re-run of iteration 1", with)
	}

	// Now a message taken by an iteration that is killed: its re-run carries it again, the
	// next iteration does not.
	ws2 := mkdir(t, filepath.Join(dir, "ws2"))
	t.Setenv("FAKE_PAUSE_AT", "1 2")
	t.Setenv("FAKE_PAUSE", "3")
	stop = startLoopUntil(t, loopArgs(t, db, ws2, "taken"), ws2, "working.1")
	if code, out := binary(t, db, "tell", "taken", toldText); code != ExitOK {
		t.Fatalf("tell: exit %d\n%s", code, out)
	}
	waitForFile(t, filepath.Join(ws2, "working.2"))
	stop(true) // iteration 2, which carries it, is cut short
	t.Setenv("FAKE_PAUSE_AT", "")
	if code, out := binary(t, db, "resume", "taken"); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if p2, p3 := readFile(t, filepath.Join(ws2, "prompt.2")), readFile(t, filepath.Join(ws2, "prompt.3")); !strings.Contains(p2, toldText) || strings.Contains(p3, toldText) {
		t.Fatalf("iteration 2's re-run must carry the message and iteration 3 not:\n%s\n---\n%s", p2, p3)
	}
}

// inbox: FILE in the agent's settings: what a human writes there reaches the next iteration
// once, and the file is emptied.
func TestInboxFileIsReadOnceAndEmptied(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	release := filepath.Join(dir, "release")
	t.Setenv("FAKE_PAUSE_AT", "1")
	t.Setenv("FAKE_RELEASE", release)
	code, src, stderr := run(t, loopArgs(t, db, ws, "filed", "--print-task")...)
	if code != ExitOK {
		t.Fatal(stderr)
	}
	src = strings.Replace(src, "    driver: command\n", "    driver: command\n    inbox: INBOX.md\n", 1)
	stop := startLoopUntil(t, []string{"--store", db, "run", writeTask(t, dir, "filed.yaml", src)}, ws, "working.1")
	if err := os.WriteFile(filepath.Join(ws, "INBOX.md"), []byte(toldText+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stop(false)
	if st := storeState(t, db, "filed"); st.Status != statefmt.StatusCompleted {
		t.Fatalf("status %s", st.Status)
	}
	prompts := readFile(t, filepath.Join(ws, "prompts.log"))
	if strings.Count(prompts, toldText) != 1 || !strings.Contains(readFile(t, filepath.Join(ws, "prompt.2")), "[Message from the human, through the inbox file INBOX.md, ") {
		t.Fatalf("prompts:\n%s", prompts)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "INBOX.md")); err != nil || len(b) != 0 {
		t.Fatalf("INBOX.md after: %q, %v", b, err)
	}
}

// tell through the daemon's HTTP API, and its refusals.
func TestTellThroughHTTPAndRefusals(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	// The daemon runs the agent: it passes on its own environment.
	release := filepath.Join(dir, "release")
	t.Setenv("FAKE_PAUSE_AT", "1")
	t.Setenv("FAKE_RELEASE", release)
	d := startDaemon(t, db)
	if code, out := binary(t, db, loopArgs(t, db, ws, "web")[2:]...); code != ExitOK {
		t.Fatalf("loop: exit %d\n%s", code, out)
	}
	waitForFile(t, filepath.Join(ws, "working.1"))
	tok, _ := os.ReadFile(filepath.Join(db, control.TokenName))
	token := strings.TrimSpace(string(tok))
	body, _ := json.Marshal(control.TellRequest{Message: toldText})
	code, resp := d.http("POST", "/v1/harnesses/web/tell", token, body)
	var told control.Told
	if code != 201 || json.Unmarshal([]byte(resp), &told) != nil || told.Message.Text != toldText || told.Message.From != "human" {
		t.Fatalf("POST tell: %d %s", code, resp)
	}
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/harnesses/web/tell", `{"message": "   "}`, 400, "the message is empty"},
		{"/v1/harnesses/web/tell", `{"msg": "x"}`, 400, "not the JSON this endpoint takes"},
		{"/v1/harnesses/nosuch/tell", `{"message": "x"}`, 404, "nosuch"},
	} {
		code, resp := d.http("POST", tc.path, token, []byte(tc.body))
		if code != tc.code || !strings.Contains(resp, tc.want) {
			t.Errorf("POST %s %s: %d %s; want %d and %q", tc.path, tc.body, code, resp, tc.code, tc.want)
		}
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, db, "web", statefmt.StatusCompleted)
	if n := strings.Count(readFile(t, filepath.Join(ws, "prompts.log")), toldText); n != 1 {
		t.Fatalf("the message is in %d prompts", n)
	}
	// The CLI refuses an empty message before asking anyone.
	if code, msg := binary(t, db, "tell", "web", " "); code != ExitUsage || !strings.Contains(msg, "the message is empty") {
		t.Fatalf("empty tell: exit %d\n%s", code, msg)
	}
}

func waitForFile(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !fileExists(p) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
