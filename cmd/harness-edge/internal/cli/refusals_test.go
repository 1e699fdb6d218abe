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

// TestARefusedRequestChangesNothing: requests the daemon refuses (a pause of a harness that has
// not started, decisions without a gate, a stop of a finished harness, over the socket and over
// HTTP) leave the store and the daemon's queue as they were: the queued harness still runs
// once the daemon is unfrozen.
func TestARefusedRequestChangesNothing(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "done.yaml", daemonTask("done", ws, 1, "1ms", false))); code != ExitOK {
		t.Fatalf("submit done: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "done", statefmt.StatusCompleted)
	if code, out, stderr := run(t, "--store", db, "freeze"); code != ExitOK {
		t.Fatalf("freeze: exit %d: %s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "f4.yaml", daemonTask("f4", ws, 2, "1ms", false))); code != ExitOK {
		t.Fatalf("submit f4: exit %d: %s%s", code, out, stderr)
	}
	health := func() control.Health {
		t.Helper()
		code, resp := d.http("GET", "/v1/health", token, nil)
		var h control.Health
		if code != 200 || json.Unmarshal([]byte(resp), &h) != nil {
			t.Fatalf("health: %d %s", code, resp)
		}
		return h
	}
	list := func() string { _, out, _ := run(t, "--store", db, "ls", "--json"); return out }
	before, queued := list(), health().Queued
	if len(queued) != 1 || queued[0] != "f4" {
		t.Fatalf("queued before: %v", queued)
	}
	for _, args := range [][]string{
		{"pause", "f4"}, {"approve", "f4"}, {"reject", "f4", "--reason", "no"}, {"approve", "f4", "g9"},
		{"stop", "done"}, {"pause", "done"}, {"resume", "done"}, {"show", "nope"}, {"pause", "nope"},
	} {
		if code, _, stderr := run(t, append([]string{"--store", db}, args...)...); code != ExitError || stderr == "" {
			t.Errorf("%v: exit %d, want a refusal: %s", args, code, stderr)
		}
	}
	for _, c := range []struct {
		method, path string
		body         string
		want         int
	}{
		{"POST", "/v1/harnesses/f4/pause", "", 409},
		{"POST", "/v1/harnesses/f4/stop", `{"gate": "g1"}`, 400},
		{"POST", "/v1/harnesses/f4/approve", "", 409},
		{"POST", "/v1/harnesses/done/stop", "", 409},
		{"POST", "/v1/harnesses/f4/bogus", "", 404},
		{"POST", "/v1/harnesses/f4/pause", `{"x": 1}`, 400},
	} {
		if code, resp := d.http(c.method, c.path, token, []byte(c.body)); code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, resp, c.want)
		}
	}
	if after := list(); after != before {
		t.Fatalf("a refused request changed the store:\n%s\n%s", before, after)
	}
	if h := health(); len(h.Queued) != 1 || h.Queued[0] != "f4" {
		t.Fatalf("a refused request changed the queue: %v", h.Queued)
	}
	if code, out, stderr := run(t, "--store", db, "unfreeze"); code != ExitOK {
		t.Fatalf("unfreeze: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "f4", statefmt.StatusCompleted)
}
