package control_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/store"
)

// storeDir is a fresh store directory, short enough for a Unix socket path.
func storeDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "store")
}

// daemonWithHTTP starts a daemon on a fresh store and returns its HTTP address, its token and
// an HTTP API client that sends the token.
func daemonWithHTTP(t *testing.T) (base, tok string, api *control.Client) {
	t.Helper()
	dir := storeDir(t)
	d, _, _ := startDaemon(t, dir)
	base = "http://" + d.HTTPAddr().String()
	tok, err := control.Token(dir)
	if err != nil {
		t.Fatal(err)
	}
	return base, tok, control.NewHTTPClient(base, tok)
}

func connect(t *testing.T, dir string) *control.Conn {
	t.Helper()
	c, err := control.Connect(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func own(t *testing.T, dir string) *control.Owned {
	t.Helper()
	o, err := control.Own(dir, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// assertStoreFree checks that nothing holds the store in dir any more.
func assertStoreFree(t *testing.T, dir string) {
	t.Helper()
	s, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatalf("the store is still held: %v", err)
	}
	s.Close()
}

// scriptTask is a task of steps that each sleep, then write a file and answer.
func scriptTask(t *testing.T, id string, steps int, sleep string) *task.Task {
	t.Helper()
	tk, err := task.Parse(id+".yaml", []byte(scriptTaskSource(t, id, steps, sleep)))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// scriptTaskSource is scriptTask's task file.
func scriptTaskSource(t *testing.T, id string, steps int, sleep string) string {
	t.Helper()
	var plan strings.Builder
	for i := range steps {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("s%d", i-1)
		}
		fmt.Fprintf(&plan, "  - {id: s%d, description: step %d, agent: A, dependsOn: [%s]}\n", i, i, dep)
	}
	return fmt.Sprintf(`id: %s
agent: A
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      steps:
        "*":
          - {sleep: %s}
          - {tool: write_file, args: {path: %s.txt, content: "a line"}}
          - {output: done}
plan:
%s`, id, t.TempDir(), sleep, id, plan.String())
}
