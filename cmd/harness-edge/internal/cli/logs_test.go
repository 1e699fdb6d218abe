package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/statefmt"
)

// logs --follow prints a running iteration's output as the agent prints it, then the next
// iteration's, and ends when the loop does.
func TestLogsFollowShowsARunningIterationAsItPrints(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	t.Setenv("FAKE_PAUSE_AT", "2")
	t.Setenv("FAKE_PAUSE", "4")
	loop := child(loopArgs(t, db, ws, "followed")...)
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = loop.Process.Kill(); _ = loop.Wait() }()
	waitForFile(t, filepath.Join(ws, "working.2"))
	logs := child("--store", db, "logs", "followed", "--follow")
	out, err := logs.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var lines []string
	sawTickWhileRunning := false
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "tick 2" {
			// The iteration is still at work: it has not written its part yet.
			sawTickWhileRunning = !fileExists(filepath.Join(ws, "part2.txt"))
		}
	}
	if err := logs.Wait(); err != nil {
		t.Fatalf("logs --follow: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if err := loop.Wait(); err != nil {
		t.Fatalf("loop: %v", err)
	}
	got := strings.Join(lines, "\n")
	if !sawTickWhileRunning {
		t.Fatalf("the iteration's output did not show while it ran:\n%s", got)
	}
	for _, want := range []string{"=== iteration 2 of step objective started", "iteration 2: reading the workspace", "Wrote part 2; more to do.",
		"=== iteration 2 ended after", "=== iteration 3 of step objective started", "=== iteration 3 ended after"} {
		if !strings.Contains(got, want) {
			t.Fatalf("logs --follow lacks %q:\n%s", want, got)
		}
	}
	// Afterwards, any iteration's log prints from the store directory.
	code, one := binary(t, db, "logs", "followed", "--iteration", "1")
	if code != ExitOK || !strings.Contains(one, "Wrote part 1; more to do.") || strings.Contains(one, "part 2") {
		t.Fatalf("logs --iteration 1: exit %d\n%s", code, one)
	}
	if code, msg := binary(t, db, "logs", "followed", "--iteration", "9"); code != ExitError || !strings.Contains(msg, "no log of iteration 9") {
		t.Fatalf("logs --iteration 9: exit %d\n%s", code, msg)
	}
	if code, msg := binary(t, db, "logs", "nosuch"); code != ExitError || !strings.Contains(msg, "nosuch") {
		t.Fatalf("logs of an unknown harness: exit %d\n%s", code, msg)
	}
}

// The daemon serves the logs on its socket and its HTTP API.
func TestLogsThroughTheDaemonAndHTTP(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), mkdir(t, filepath.Join(dir, "ws"))
	d := startDaemon(t, db)
	if code, out := binary(t, db, loopArgs(t, db, ws, "served")[2:]...); code != ExitOK {
		t.Fatalf("loop: exit %d\n%s", code, out)
	}
	waitStatus(t, db, "served", statefmt.StatusCompleted)
	tok, _ := os.ReadFile(filepath.Join(db, control.TokenName))
	token := strings.TrimSpace(string(tok))
	code, body := d.http("GET", "/v1/harnesses/served/logs?iteration=2", token, nil)
	if code != 200 || !strings.Contains(body, "=== iteration 2 of step objective started") || !strings.Contains(body, "Wrote part 2") {
		t.Fatalf("GET logs: %d\n%s", code, body)
	}
	code, body = d.http("GET", "/v1/harnesses/served/logs?follow=1", token, nil)
	if code != 200 || !strings.Contains(body, "=== iteration 3 ended after") {
		t.Fatalf("GET logs?follow=1 of a finished harness: %d\n%s", code, body)
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/v1/harnesses/served/logs?iteration=abc", 400, "not an iteration number"},
		{"/v1/harnesses/served/logs?iteration=0", 400, "not an iteration number"},
		{"/v1/harnesses/served/logs?iteration=12", 404, "no log of iteration 12"},
		{"/v1/harnesses/nosuch/logs", 404, "nosuch"},
	} {
		code, body := d.http("GET", tc.path, token, nil)
		var e struct{ Error string }
		_ = json.Unmarshal([]byte(body), &e)
		if code != tc.code || !strings.Contains(e.Error, tc.want) {
			t.Errorf("GET %s: %d %s; want %d and %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	if code, _ := d.http("GET", "/v1/harnesses/served/logs", "", nil); code != 401 {
		t.Errorf("logs without the token: %d", code)
	}
	// Through the socket, the same.
	if code, out := binary(t, db, "logs", "served", "--iteration", "3"); code != ExitOK || !strings.Contains(out, "All parts are written.") {
		t.Fatalf("logs through the daemon: exit %d\n%s", code, out)
	}
}
