package tools

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// Lines that hide a command from the allow rules, or a denied program from the deny rules.
// Each is refused, and none of them runs: the marker file is never made.
func TestBashRulesSeeThroughShellSyntax(t *testing.T) {
	echo := []string{"echo *"}
	for _, c := range []struct {
		line  string
		allow []string
	}{
		{"echo # \"\ntouch M\n# \"", echo},
		{`echo $'\'' ; touch M ; # '`, echo},
		{"echo x && { touch M; }", echo},
		{"f() { touch M; }; echo x", echo},
		{"echo $(touch M)", echo},
		{"echo <(touch M)", echo},
		{"echo \"$(touch M)\"", echo},
		{"echo ${x:-$(touch M)}", echo},
		{"x='a[$(touch M)]'; echo $((x))", echo},
		{"x='a[$(touch M)]'; echo ${y[x]}", echo},
		{"$CMD M", echo},
		{"e\\cho x; t\"ouc\"h M", echo},
		{"eval 'touch M'", []string{"echo *", "eval *"}},
		{"bash -c 'touch M'", []string{"echo *", "bash *"}},
		{"sh -ec 'echo x; touch M'", []string{"echo *", "sh *"}},
		{"bash -o pipefail -c 'touch M'", []string{"echo *", "bash *"}},
		{"env touch M", []string{"echo *", "env *"}},
		{"timeout 5 touch M", []string{"echo *", "timeout *"}},
		{"echo M | xargs touch", []string{"echo *", "xargs *"}},
		{"find . -maxdepth 0 -exec touch M \\;", []string{"echo *", "find *"}},
		{"/bin/to?ch M", []string{"echo *", "/bin/to?ch *"}},
		{"LD_PRELOAD=./x.so echo x", echo},
		{"trap 'touch M' EXIT; echo x", []string{"echo *", "trap *"}},
		{"echo x | (touch M)", echo},
	} {
		if err := checkBash(c.line, c.allow, nil); err == nil {
			t.Errorf("checkBash(%q, allow %q) passed", c.line, c.allow)
		}
	}
	for _, line := range []string{
		"su -c 'id'", "/usr/bin/sudo id", `"sudo" id`, "'sudo' id", "s\\udo id", "env sudo id",
		"env -i FOO=1 sudo id", "nice -n 5 sudo id", "timeout -s KILL 5 sudo id", "nohup sudo id",
		"xargs -i sudo id", "echo id | xargs sudo", "bash -c 'sudo id'", "sh -c \"ls; sudo id\"",
		"eval 'sudo id'", "command sudo id", "exec sudo id", "taskset 0x1 sudo id", "busybox su",
		"find . -exec sudo id \\;", "echo $(sudo id)", "f() { sudo id; }", "bash -c \"bash -c 'sudo id'\"",
		"/usr/sbin/shutdown now", "rm -rf /{,}", "su{,} -c id", "s{u,}do id", "X=1 /usr/bin/env sudo id",
	} {
		if err := checkBash(line, nil, nil); err == nil {
			t.Errorf("checkBash(%q) passed the deny list", line)
		}
	}
	for _, c := range []struct {
		line  string
		allow []string
	}{
		{"echo '# not a comment'; echo \"a;b\"", echo},
		{"echo \\\ntouch M", echo},
		{"echo $HOME \"$PWD\" ${USER:-x} $((1+2))", echo},
		{"go test ./... 2>&1 | tail -5", []string{"go *", "tail *"}},
		{"for f in a b; do echo $f; done", echo},
		{"if echo a; then echo b; fi", echo},
		{"bash -c 'echo hi'", []string{"echo *", "bash *"}},
		{"command -v sudo", nil},
		{"echo sudo", nil},
		{"git log --format='%s' | head -3", []string{"git *", "head *"}},
	} {
		if err := checkBash(c.line, c.allow, nil); err != nil {
			t.Errorf("checkBash(%q, allow %q) = %v, want it to pass", c.line, c.allow, err)
		}
	}
}

// The reported lines, run for real: refused, and no file made.
func TestBashAllowRulesHoldForRealCommands(t *testing.T) {
	s := newSandbox(t)
	s.env.cfg = &task.ToolConfig{MaxOutput: task.DefaultMaxOutput, Allow: []string{"echo *"}}
	for _, line := range []string{"echo # \"\ntouch M\n# \"", `echo $'\'' ; touch M ; # '`} {
		if res := s.run("bash", map[string]any{"command": line}); res.ErrorKind != "permission" {
			t.Errorf("%q: %+v", line, res)
		}
		if _, err := os.Stat(filepath.Join(s.ws, "M")); err == nil {
			t.Fatalf("%q made the file", line)
		}
	}
	if res := s.run("bash", map[string]any{"command": "echo '# a' \"b\"; echo c"}); !res.Success || res.Output != "# a b\nc\n" {
		t.Fatalf("allowed echo: %+v", res)
	}
}
