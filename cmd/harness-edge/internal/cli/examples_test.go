package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/internal/openaitest"
)

// copyExample copies an example task file (and the stand-in agents it may use) into a temporary
// examples directory, so that its relative workspace starts empty; edit rewrites the file.
func copyExample(t *testing.T, name string, edit func(string) string) (dir, file string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "examples")
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	agent, err := os.ReadFile("../../../../examples/agents/fake-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../../../examples/" + name)
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, name)
	if err := os.WriteFile(filepath.Join(dir, "agents", "fake-agent.sh"), agent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(edit(string(src))), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// The example task of each agent driver runs as the README says, end to end.
func TestExampleTasks(t *testing.T) {
	t.Run("ralph", func(t *testing.T) {
		t.Setenv("FAKE_AGENT_RESET", "1 second")
		dir, file := copyExample(t, "ralph.yaml", func(s string) string { return s })
		code, out, stderr := run(t, "--store", filepath.Join(dir, "store"), "run", file)
		if code != ExitOK || !strings.Contains(out, "<promise>PARTS_DONE</promise>") {
			t.Fatalf("exit %d: %s%s", code, out, stderr)
		}
		for _, f := range []string{"part1.txt", "part2.txt", "part3.txt", "handoff.json"} {
			if !fileExists(filepath.Join(dir, "ralph-workspace", f)) {
				t.Errorf("the agent did not write %s", f)
			}
		}
	})
	t.Run("openai", func(t *testing.T) {
		srv := openaitest.New()
		defer srv.Close()
		srv.Respond = openaitest.NotesSession
		dir, file := copyExample(t, "openai.yaml", func(s string) string {
			return regexp.MustCompile(`endpoint: .*`).ReplaceAllString(s, `endpoint: "`+srv.Endpoint()+`"`)
		})
		code, out, stderr := run(t, "--store", filepath.Join(dir, "store"), "run", file)
		if code != ExitOK || !strings.Contains(out, "NOTES.md is written") {
			t.Fatalf("exit %d: %s%s", code, out, stderr)
		}
		if notes, _ := os.ReadFile(filepath.Join(dir, "openai-workspace", "NOTES.md")); !strings.HasPrefix(string(notes), "# Notes") {
			t.Fatalf("NOTES.md %q", notes)
		}
		if n := len(srv.Requests()); n != 3 {
			t.Fatalf("%d model requests, want 3", n)
		}
	})
}
