package proc_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/proc"
)

// LookPath searches the PATH of the clean environment, only its absolute directories, and
// only executable files.
func TestLookPath(t *testing.T) {
	bin, rel := t.TempDir(), "relbin"
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{"agent", 0o755}, {"plain", 0o644}} {
		if err := os.WriteFile(filepath.Join(bin, f.name), nil, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rel, "dotted"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", rel+string(filepath.ListSeparator)+bin)
	if p, err := proc.LookPath("agent", nil); err != nil || p != filepath.Join(bin, "agent") {
		t.Fatalf("agent: %q %v", p, err)
	}
	if p, err := proc.LookPath(filepath.Join(bin, "agent"), []string{"PATH"}); err != nil || p == "" {
		t.Fatalf("absolute: %q %v", p, err)
	}
	for _, name := range []string{"plain", "dotted", "missing", filepath.Join(bin, "plain"), filepath.Join(bin, "missing")} {
		if _, err := proc.LookPath(name, nil); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if p, err := proc.LookPath("./made-later.sh", nil); err != nil || p != "" {
		t.Errorf("a workspace path: %q %v", p, err)
	}
}
