package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
)

// daemon is a `harness-edge serve` child process.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // the HTTP API's address
	log    *bytes.Buffer
	done   chan struct{}
	exited chan struct{}
}

// startDaemon starts `serve --http 127.0.0.1:0` on store and waits until it listens.
func startDaemon(t *testing.T, db string, extra ...string) *daemon {
	t.Helper()
	cmd := child(append([]string{"--store", db, "serve", "--http", "127.0.0.1:0", "--shutdown-timeout", "20s"}, extra...)...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cmd: cmd, log: &bytes.Buffer{}, done: make(chan struct{}), exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			d.log.WriteString(line + "\n")
			if m := regexp.MustCompile(`HTTP API listening" addr=(\S+)`).FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
			if strings.Contains(line, "daemon started") {
				close(d.done)
			}
		}
	}()
	go func() { _ = cmd.Wait(); pw.Close(); close(d.exited) }()
	select {
	case d.addr = <-addr:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the daemon did not start:\n%s", d.log)
	}
	<-d.done
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return d
}

// http sends a request to the daemon's HTTP API with token (none when "").
func (d *daemon) http(method, path, token string, body []byte) (int, string) {
	d.t.Helper()
	req, err := http.NewRequest(method, "http://"+d.addr+path, bytes.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitStatus polls `show --json` (through the socket) until the harness has status want.
func waitStatus(t *testing.T, db, id string, want statefmt.Status) *statefmt.HarnessState {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, out, _ := run(t, "--store", db, "show", id, "--json")
		if code == ExitOK {
			st, err := statefmt.DecodeJSON([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			if st.Status == want {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("harness %s is %s (%s), want %s", id, st.Status, st.StatusReason, want)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("harness %s: show exits %d", id, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeTask writes a task file into dir and returns its path.
func writeTask(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func daemonTask(id, ws string, steps int, sleep string, critical bool) string {
	var plan strings.Builder
	for i := range steps {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("s%d", i-1)
		}
		crit := ""
		if critical && i == steps-1 {
			crit = ", critical: true"
		}
		fmt.Fprintf(&plan, "  - {id: s%d, description: step %d, agent: A, dependsOn: [%s]%s}\n", i, i, dep, crit)
	}
	return fmt.Sprintf(`id: %s
agent: A
autonomy: 3
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      steps:
        "*":
          - {sleep: %s}
          - {tool: write_file, args: {path: %s.txt, content: "one more line"}}
          - {output: done}
plan:
%s`, id, ws, sleep, id, plan.String())
}

// TestDaemon drives a real daemon process: tasks submitted over the socket and over HTTP,
// gates approved through both, the HTTP API's refusals, a second daemon refused, the daemon
// killed with SIGKILL mid-run and restarted (the interrupted harness resumes and completes),
// and a graceful SIGTERM (the running harness paused, resumed by the next daemon).
func TestDaemon(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	write := func(name, src string) string { return writeTask(t, dir, name, src) }
	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	if fi, err := os.Stat(filepath.Join(db, control.TokenName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(control.SocketPath(db)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v", err)
	}

	// A second daemon on the same store is refused, clearly.
	second := child("--store", db, "serve")
	var secondErr bytes.Buffer
	second.Stderr = &secondErr
	if err := second.Run(); err == nil || !strings.Contains(secondErr.String(), fmt.Sprintf("owned by the harness-edge daemon (pid %d)", d.cmd.Process.Pid)) {
		t.Fatalf("second daemon: %v: %s", err, secondErr.String())
	}
	// So is a foreground run, pointing at submit.
	if code, _, stderr := run(t, "--store", db, "run", write("x.yaml", daemonTask("x", ws, 1, "1ms", false))); code != ExitError || !strings.Contains(stderr, "harness-edge submit") {
		t.Fatalf("run beside the daemon: exit %d: %s", code, stderr)
	}

	// Over the socket: a gated task, approved through the socket; the daemon resumes it.
	if code, out, stderr := run(t, "--store", db, "submit", write("a.yaml", daemonTask("a", ws, 2, "10ms", true))); code != ExitOK || !strings.Contains(out, "submitted: harness a") {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "a", statefmt.StatusPaused)
	if code, out, stderr := run(t, "--store", db, "approve", "a"); code != ExitOK || !strings.Contains(out, "the daemon (pid") {
		t.Fatalf("approve: exit %d: %s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "--store", db, "events", "a", "--follow")
	if code != ExitOK || !strings.Contains(out, "running -> completed") {
		t.Fatalf("events --follow: exit %d: %s%s", code, out, stderr)
	}

	// Over HTTP: refusals first, and nothing changes.
	list := func() string { _, out, _ := run(t, "--store", db, "ls", "--json"); return out }
	before := list()
	body, _ := json.Marshal(control.SubmitRequest{Task: daemonTask("h", ws, 2, "10ms", true), Dir: dir})
	for _, c := range []struct {
		name, method, path, token string
		body                      []byte
		want                      int
	}{
		{"no token", "POST", "/v1/harnesses", "", body, 401},
		{"wrong token", "POST", "/v1/harnesses", strings.Repeat("0", len(token)), body, 401},
		{"wrong token, read", "GET", "/v1/harnesses", "nope", nil, 401},
		{"oversized", "POST", "/v1/harnesses", token, bytes.Repeat([]byte("x"), control.MaxBody+1), 413},
		{"malformed", "POST", "/v1/harnesses", token, []byte(`{"task": `), 400},
		{"unknown field", "POST", "/v1/harnesses", token, []byte(`{"task": "id: q", "bogus": 1}`), 400},
		{"bad task", "POST", "/v1/harnesses", token, []byte(`{"task": "id: q\nagent: NOPE\n"}`), 400},
		{"reject without reason", "POST", "/v1/harnesses/a/reject", token, nil, 400},
		{"unknown harness", "POST", "/v1/harnesses/zz/pause", token, nil, 404},
	} {
		code, resp := d.http(c.method, c.path, c.token, c.body)
		var eb struct{ Error string }
		if code != c.want || json.Unmarshal([]byte(resp), &eb) != nil || eb.Error == "" {
			t.Errorf("%s: %d %s, want %d with a JSON error", c.name, code, resp, c.want)
		}
	}
	if after := list(); after != before {
		t.Fatalf("a refused request changed the store:\n%s\n%s", before, after)
	}
	// Without the token health says only that the daemon is up; with it, who runs what.
	if code, resp := d.http("GET", "/v1/health", "", nil); code != 200 || strings.TrimSpace(resp) != `{"ok":true,"version":"dev"}` {
		t.Fatalf("health without the token: %d %s", code, resp)
	}
	if code, resp := d.http("GET", "/v1/health", token, nil); code != 200 || !strings.Contains(resp, `"owner":"daemon"`) {
		t.Fatalf("health: %d %s", code, resp)
	}
	if code, resp := d.http("POST", "/v1/harnesses", token, body); code != 201 || !strings.Contains(resp, `"id":"h"`) {
		t.Fatalf("submit over HTTP: %d %s", code, resp)
	}
	waitStatus(t, db, "h", statefmt.StatusPaused)
	if code, resp := d.http("POST", "/v1/harnesses/h/approve", token, []byte(`{"gate": "g1"}`)); code != 200 || !strings.Contains(resp, `"resumed":true`) {
		t.Fatalf("approve over HTTP: %d %s", code, resp)
	}
	waitStatus(t, db, "h", statefmt.StatusCompleted)
	if code, resp := d.http("GET", "/v1/harnesses/h/events?follow=1", token, nil); code != 200 || !strings.Contains(resp, "event: plan_completed") || !strings.HasSuffix(resp, "event: end\ndata: {}\n\n") {
		t.Fatalf("SSE events: %d %s", code, resp)
	}

	// SIGKILL in the middle of a long harness; a new daemon resumes it from its last checkpoint.
	if code, out, stderr := run(t, "--store", db, "submit", write("b.yaml", daemonTask("b", ws, 6, "150ms", false))); code != ExitOK {
		t.Fatalf("submit b: exit %d: %s%s", code, out, stderr)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st := waitStatus(t, db, "b", statefmt.StatusRunning); st.Plan.Steps[1].Status == statefmt.StepCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never got going")
		}
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	if _, err := os.Stat(control.SocketPath(db)); err != nil {
		t.Fatalf("a killed daemon leaves its socket behind, for the next one to replace: %v", err)
	}
	// With the owner dead, commands open the store directly and see b interrupted.
	if code, out, _ := run(t, "--store", db, "ls"); code != ExitOK || !regexp.MustCompile(`b\s+A\s+running`).MatchString(out) {
		t.Fatalf("ls with a dead owner: %d %s", code, out)
	}
	d = startDaemon(t, db)
	if !strings.Contains(d.log.String(), "resumed=b") {
		t.Fatalf("the new daemon did not resume b:\n%s", d.log)
	}
	st := waitStatus(t, db, "b", statefmt.StatusCompleted)
	for _, s := range st.Plan.Steps {
		if s.Status != statefmt.StepCompleted || s.Output == nil || *s.Output != "wrote 13 bytes to b.txt\ndone" {
			t.Fatalf("step %s: %s %v", s.ID, s.Status, s.Output)
		}
	}

	// SIGTERM: the running harness pauses (reason "daemon shutdown") and the daemon exits in time.
	if code, out, stderr := run(t, "--store", db, "submit", write("c.yaml", daemonTask("c", ws, 4, "2s", false))); code != ExitOK {
		t.Fatalf("submit c: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "c", statefmt.StatusRunning)
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not exit after SIGTERM")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("daemon exit %d after SIGTERM:\n%s", code, d.log)
	}
	t.Logf("SIGTERM to exit: %v", time.Since(start))
	if _, err := os.Stat(control.SocketPath(db)); err == nil {
		t.Fatal("a daemon that stopped cleanly left its socket")
	}
	st = storeState(t, db, "c")
	if st.Status != statefmt.StatusPaused || st.StatusReason != harness.ReasonShutdown {
		t.Fatalf("after SIGTERM c is %s (%s)", st.Status, st.StatusReason)
	}
	d = startDaemon(t, db)
	waitStatus(t, db, "c", statefmt.StatusCompleted)

	// The morning report, through the daemon.
	code, out, _ = run(t, "--store", db, "report", "--json")
	var rep control.Report
	if code != ExitOK || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("report: %d %s", code, out)
	}
	if rep.Counts[statefmt.StatusCompleted] != 4 || len(rep.Harnesses) != 4 || rep.Checkpoints == 0 || rep.StoredBytes == 0 {
		t.Fatalf("report: %+v", rep)
	}
}

func storeState(t *testing.T, db, id string) *statefmt.HarnessState {
	t.Helper()
	s, err := store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Restore(id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestForegroundRunOwnsTheStore: while `run` works, other commands reach it through its socket:
// ls and show answer, and pause stops it (exit 3) with its state persisted.
func TestForegroundRunOwnsTheStore(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	taskFile := writeTask(t, dir, "f.yaml", daemonTask("f", ws, 5, "400ms", false))
	cmd := child("--store", db, "run", taskFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitStatus(t, db, "f", statefmt.StatusRunning)
	if code, out, _ := run(t, "--store", db, "ls"); code != ExitOK || !regexp.MustCompile(`f\s+A\s+running`).MatchString(out) {
		t.Fatalf("ls through the run's socket: %d %s", code, out)
	}
	if code, _, stderr := run(t, "--store", db, "submit", taskFile); code != ExitError || !strings.Contains(stderr, "no daemon owns this store (owner: run)") {
		t.Fatalf("submit to a foreground run: %d %s", code, stderr)
	}
	// A second run is refused, naming the harness the first one runs.
	other := writeTask(t, dir, "g.yaml", daemonTask("g", ws, 1, "1ms", false))
	if code, _, stderr := run(t, "--store", db, "run", other); code != ExitError || !strings.Contains(stderr, fmt.Sprintf("(pid %d, running f)", cmd.Process.Pid)) {
		t.Fatalf("a second run: %d %s", code, stderr)
	}
	if code, out, stderr := run(t, "--store", db, "pause", "f"); code != ExitOK || !strings.Contains(out, "harness f: paused") {
		t.Fatalf("pause: %d %s%s", code, out, stderr)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != ExitWaiting {
		t.Fatalf("the paused run exited %d, want %d", code, ExitWaiting)
	}
	if st := storeState(t, db, "f"); st.Status != statefmt.StatusPaused || st.StatusReason != control.ReasonRequested {
		t.Fatalf("stored: %s (%s)", st.Status, st.StatusReason)
	}
}

// TestDaemonFreeze: freeze --pause pauses the running harness and holds a new submission; the
// freeze outlives a restart; unfreeze resumes both.
func TestDaemonFreeze(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	write := func(name, src string) string { return writeTask(t, dir, name, src) }
	d := startDaemon(t, db)
	if code, out, stderr := run(t, "--store", db, "submit", write("a.yaml", daemonTask("a", ws, 4, "300ms", false))); code != ExitOK {
		t.Fatalf("submit: %d %s%s", code, out, stderr)
	}
	waitStatus(t, db, "a", statefmt.StatusRunning)
	// It answers once the harness has paused.
	if code, out, stderr := run(t, "--store", db, "freeze", "--pause"); code != ExitOK || !strings.Contains(out, "frozen=true, running 0") {
		t.Fatalf("freeze: %d %s%s", code, out, stderr)
	}
	if st := waitStatus(t, db, "a", statefmt.StatusPaused); st.StatusReason != control.ReasonFrozen {
		t.Fatalf("a paused for %q", st.StatusReason)
	}
	if code, _, stderr := run(t, "--store", db, "submit", write("b.yaml", daemonTask("b", ws, 1, "1ms", false))); code != ExitOK {
		t.Fatalf("submit while frozen: %d %s", code, stderr)
	}
	time.Sleep(300 * time.Millisecond)
	if st := waitStatus(t, db, "b", statefmt.StatusCreated); st.CheckpointCount != 1 {
		t.Fatalf("b started while frozen: %+v", st.Status)
	}
	// The freeze is kept across a restart.
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	d = startDaemon(t, db)
	if !strings.Contains(d.log.String(), "frozen=true") {
		t.Fatalf("the restarted daemon is not frozen:\n%s", d.log)
	}
	time.Sleep(300 * time.Millisecond)
	waitStatus(t, db, "b", statefmt.StatusCreated)
	if code, out, stderr := run(t, "--store", db, "unfreeze"); code != ExitOK || !strings.Contains(out, "frozen=false") {
		t.Fatalf("unfreeze: %d %s%s", code, out, stderr)
	}
	waitStatus(t, db, "a", statefmt.StatusCompleted)
	waitStatus(t, db, "b", statefmt.StatusCompleted)
}

// lineWatch is a stdout that says when a line containing want arrives.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return len(p), nil
}

// follow runs `events ID --follow` in this process until it has printed want, which must come
// before the command ends; it returns what the command printed, its exit code once it ends,
// and its standard error.
func follow(t *testing.T, db, id, want string) (*lineWatch, <-chan int, *bytes.Buffer) {
	t.Helper()
	w := &lineWatch{want: want, seen: make(chan struct{})}
	seen := w.seen
	done := make(chan int, 1)
	errb := &bytes.Buffer{}
	go func() { done <- Main([]string{"--store", db, "events", id, "--follow"}, w, errb) }()
	select {
	case <-seen:
	case code := <-done:
		t.Fatalf("events --follow ended (exit %d) before it printed %q: %s", code, want, errb)
	case <-time.After(60 * time.Second):
		w.mu.Lock()
		defer w.mu.Unlock()
		t.Fatalf("events --follow printed no %q; printed so far:\n%s", want, w.buf.String())
	}
	return w, done, errb
}

// events --follow prints each event as it comes: a harness waiting at a gate has its events
// on the terminal while the command still waits for more.
func TestEventsFollowPrintsEventsBeforeTheHarnessEnds(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "db"), filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, db)
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "g.yaml", daemonTask("g", ws, 2, "1ms", true))); code != ExitOK {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "g", statefmt.StatusPaused)
	w, done, errb := follow(t, db, "g", "gate")
	if code, out, stderr := run(t, "--store", db, "approve", "g"); code != ExitOK {
		t.Fatalf("approve: exit %d: %s%s", code, out, stderr)
	}
	select {
	case code := <-done:
		w.mu.Lock()
		defer w.mu.Unlock()
		if code != ExitOK || !strings.Contains(w.buf.String(), "running -> completed") {
			t.Fatalf("events --follow: exit %d: %s%s", code, w.buf.String(), errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("events --follow did not end after the harness completed")
	}
}

// events --follow of a harness whose daemon is killed prints what the harness wrote, then says
// that nobody runs it any more and how to go on, and fails: it does not end as if the harness
// had. ls and show say so too.
func TestFollowLsAndShowSaySoWhenTheOwnerIsKilled(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "db"), filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, db)
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "k.yaml", daemonTask("k", ws, 200, "50ms", false))); code != ExitOK {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	_, done, errb := follow(t, db, "k", "step s1 ")
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code == ExitOK || !strings.Contains(errb.String(), "went away") || !strings.Contains(errb.String(), "harness-edge resume k") {
			t.Fatalf("events --follow after the daemon was killed: exit %d, stderr %q", code, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("events --follow did not end after the daemon was killed")
	}
	// ls and show, which open the store themselves now, say the same of it.
	if code, out, stderr := run(t, "--store", db, "ls"); code != ExitOK || !strings.Contains(out, "running (no process)") ||
		!strings.Contains(out, "the process that ran k was killed or lost power") {
		t.Fatalf("ls after the daemon was killed: exit %d: %s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "--store", db, "show", "k"); code != ExitOK || !strings.Contains(out, "k is marked running, but no process runs it") ||
		!strings.Contains(out, "harness-edge resume k") {
		t.Fatalf("show after the daemon was killed: exit %d: %s%s", code, out, stderr)
	}
}

// serve --log-events=false logs the daemon's own messages and the events that are warnings or
// failures, not every event; the store's event log still holds them all.
func TestServeLogsOnlyWarningsAndFailuresWithoutLogEvents(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "db"), filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, db, "--log-events=false")
	src := fmt.Sprintf(`id: q
agent: A
autonomy: 5
workspace: %s
agents:
  A:
    driver: script
    tools: [read_file]
    script:
      steps:
        ok: [{output: fine}]
        bad: [{tool: read_file, args: {path: missing.txt}}]
plan:
  - {id: ok, description: ok, agent: A}
  - {id: bad, description: bad, agent: A, dependsOn: [ok]}
`, ws)
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "q.yaml", src)); code != ExitOK {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "q", statefmt.StatusFailed)
	code, out, _ := run(t, "--store", db, "events", "q")
	if code != ExitOK || !strings.Contains(out, "step_completed") || !strings.Contains(out, "checkpoint") {
		t.Fatalf("events: exit %d: %s", code, out)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	log := d.log.String()
	for _, want := range []string{"daemon started", "msg=tool_call", "msg=step_failed"} {
		if !strings.Contains(log, want) {
			t.Errorf("the daemon's log lacks %q:\n%s", want, log)
		}
	}
	for _, not := range []string{"msg=step_started", "msg=step_completed", "msg=checkpoint"} {
		if strings.Contains(log, not) {
			t.Errorf("the daemon's log has %q with --log-events=false:\n%s", not, log)
		}
	}
}
