package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
)

// The metrics are the same through the command line (the socket) and over HTTP, and without
// a daemon the command reads the store itself.
func TestMetricsThroughTheCommandLineTheSocketAndHTTP(t *testing.T) {
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	d := startDaemon(t, db)
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "a.yaml", daemonTask("a", ws, 2, "1ms", true))); code != ExitOK {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, db, "a", statefmt.StatusPaused)
	code, viaSocket, stderr := run(t, "--store", db, "metrics")
	if code != ExitOK || !strings.Contains(viaSocket, `harness_edge_harnesses{status="paused"} 1`) || !strings.Contains(viaSocket, "harness_edge_gates_waiting 1") ||
		!strings.Contains(viaSocket, "harness_edge_governor_waits_total 0") {
		t.Fatalf("metrics through the socket: exit %d:\n%s%s", code, viaSocket, stderr)
	}
	tok, err := os.ReadFile(filepath.Join(db, "http.token"))
	if err != nil {
		t.Fatal(err)
	}
	if code, viaHTTP := d.http("GET", "/metrics", strings.TrimSpace(string(tok)), nil); code != 200 || viaHTTP != viaSocket {
		t.Fatalf("metrics over HTTP: %d\n%s\nthrough the socket:\n%s", code, viaHTTP, viaSocket)
	}
	if code, body := d.http("GET", "/metrics", "", nil); code != 401 {
		t.Fatalf("metrics over HTTP without the token: %d %s", code, body)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	code, local, stderr := run(t, "--store", db, "metrics")
	if code != ExitOK || !strings.Contains(local, `harness_edge_harnesses{status="paused"} 1`) || strings.Contains(local, "governor") {
		t.Fatalf("metrics without a daemon: exit %d:\n%s%s", code, local, stderr)
	}
}
