//go:build agents

// Package agents runs `harness-edge loop` around the real Claude Code and Codex CLIs, as npm
// installs them (the versions pinned in package.json here; `make deps-agents`), against scripted
// model servers on a loopback port: the model is the only thing faked. Every process is real:
// the harness-edge binary built from this tree, the CLI it starts, the file the CLI's tool call
// writes, the store on disk. `make test-agents` runs these tests (the `agents` build tag keeps
// them out of `make test`, which needs neither node nor the npm install).
package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// harnessEdge is the binary TestMain builds.
var harnessEdge string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "harness-edge-agents-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	harnessEdge = filepath.Join(dir, "harness-edge")
	build := exec.Command("go", "build", "-o", harnessEdge, "github.com/harness-edge/harness-edge/cmd/harness-edge")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building harness-edge:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli is the path of an installed agent CLI (node_modules/.bin/NAME under
// $HARNESS_EDGE_AGENTS_DIR, by default the repository's .cache/agents). The test skips, saying
// so, when it is not installed: these tests need the npm packages `make deps-agents` installs.
func cli(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("HARNESS_EDGE_AGENTS_DIR")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents")
	}
	p, err := filepath.Abs(filepath.Join(dir, "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed (%v): `make deps-agents` installs the pinned npm packages into %s", name, err, dir)
	}
	return p
}

// loop runs `harness-edge loop` with env as the whole environment (plus PATH), and returns its
// exit code and combined output.
func loop(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	return harness(t, env, append([]string{"loop"}, args...)...)
}

func harness(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(harnessEdge, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	for _, v := range []string{"HARNESS_EDGE_ENGINE_LIB", "HARNESS_EDGE_EXPECT_BACKEND"} {
		if val, ok := os.LookupEnv(v); ok {
			cmd.Env = append(cmd.Env, v+"="+val)
		}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	case err != nil:
		t.Fatal(err)
	}
	return 0, string(out)
}

// state is `show --json` of a harness.
func state(t *testing.T, env []string, db, id string) *statefmt.HarnessState {
	t.Helper()
	code, out := harness(t, env, "--store", db, "show", "--json", id)
	if code != 0 {
		t.Fatalf("show --json: exit %d\n%s", code, out)
	}
	st, err := statefmt.DecodeJSON([]byte(out))
	if err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	return st
}

// usages is the usage of each iteration event of a harness (`events --json`).
func usages(t *testing.T, env []string, db, id string) []event.Usage {
	t.Helper()
	code, out := harness(t, env, "--store", db, "events", "--json", id)
	if code != 0 {
		t.Fatalf("events --json: exit %d\n%s", code, out)
	}
	var us []event.Usage
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e event.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("events --json: %v: %s", err, line)
		}
		if e.Type == event.Iteration && e.Usage != nil {
			us = append(us, *e.Usage)
		}
	}
	return us
}

// agentLog is every iteration's log of a harness, for a failure message.
func agentLog(t *testing.T, env []string, db, id string) string {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= 5; i++ {
		code, out := harness(t, env, "--store", db, "logs", id, "--iteration", fmt.Sprint(i))
		if code != 0 {
			break
		}
		b.WriteString(out)
	}
	return b.String()
}

// near: the store keeps millionths of a dollar.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
