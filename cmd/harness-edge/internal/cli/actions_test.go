package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/statefmt"
)

// TestHTTPPauseAnswersOnceDoneAndResumeIsAccepted: POST .../pause answers once the harness has
// paused, with its new status; POST .../resume answers 202 Accepted (the harness is queued) and
// says where to watch it.
func TestHTTPPauseAnswersOnceDoneAndResumeIsAccepted(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "p.yaml", daemonTask("p", ws, 4, "400ms", false))); code != ExitOK {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	for range 2 {
		waitStatus(t, db, "p", statefmt.StatusRunning)
		code, resp := d.http("POST", "/v1/harnesses/p/pause", token, nil)
		var paused struct {
			ID, Action string
			Status     statefmt.Status
		}
		if code != 200 || json.Unmarshal([]byte(resp), &paused) != nil || paused.Status != statefmt.StatusPaused {
			t.Fatalf("pause: %d %s", code, resp)
		}
		if code, out, _ := run(t, "--store", db, "show", "p", "--json"); code != ExitOK || !strings.Contains(out, `"status": "paused"`) {
			t.Fatalf("show right after the pause answered: %d %s", code, out)
		}
		code, resp = d.http("POST", "/v1/harnesses/p/resume", token, nil)
		var resumed struct {
			ID, Action, Watch string
			Queued            bool
		}
		if code != 202 || json.Unmarshal([]byte(resp), &resumed) != nil || !resumed.Queued || resumed.Watch != "/v1/harnesses/p/events?follow=1" {
			t.Fatalf("resume: %d %s", code, resp)
		}
	}
	// The CLI's pause and resume go through the same answers.
	waitStatus(t, db, "p", statefmt.StatusRunning)
	if code, out, stderr := run(t, "--store", db, "pause", "p"); code != ExitOK || out != "harness p: paused\n" {
		t.Fatalf("pause: exit %d: %s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "--store", db, "resume", "p"); code != ExitOK || !strings.Contains(out, "queued in the daemon") {
		t.Fatalf("resume: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "p", statefmt.StatusCompleted)
}
