package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt/event"
)

// moveTask waits for a human at its critical last step, after a step delegated to a sub-agent.
const moveTask = `id: mv
agent: A
autonomy: 3
workspace: ./ws
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      steps:
        "*": [{tool: write_file, args: {path: a.txt, content: a}}, {output: "A's part"}]
  B:
    driver: script
    tools: [write_file]
    script:
      steps:
        "*": [{tool: write_file, args: {path: b.txt, content: b}}, {output: "B's part"}]
plan:
  - {id: prep, description: prepare, agent: A}
  - {id: draft, description: B drafts, agent: B, dependsOn: [prep]}
  - {id: ship, description: ship it, agent: A, dependsOn: [draft], critical: true}
`

// cli runs harness-edge in its own process and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := child(args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	default:
		t.Fatalf("%v: %v", args, err)
		return 0, ""
	}
}

// eventsOf is a harness's event log, read with `events --json` in its own process.
func eventsOf(t *testing.T, db, id string) []event.Event {
	t.Helper()
	code, out := cli(t, "--store", db, "events", id, "--json")
	if code != ExitOK {
		t.Fatalf("events %s: exit %d: %s", id, code, out)
	}
	var evs []event.Event
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e event.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("events %s: %v\n%s", id, err, out)
		}
		evs = append(evs, e)
	}
	return evs
}

// A harness waiting at a gate, with a sub-agent and an event log, moves to another store by
// export --chain and import (each command its own process) and goes on there as it would have
// on the first: approve, resume to the end, its events and checkpoints numbered on from where
// they were. Both stores verify. A replacing import brings back the exported family, old
// events gone; stop works on a moved harness; damaged and old-format files are refused.
func TestMovedHarnessGoesOnOnAnotherStore(t *testing.T) {
	dir := t.TempDir()
	taskFile := writeTask(t, dir, "mv.yaml", moveTask)
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	expect := func(want int, contains string, args ...string) string {
		t.Helper()
		code, out := cli(t, args...)
		if code != want || !strings.Contains(out, contains) {
			t.Fatalf("%v: exit %d (want %d), output lacks %q:\n%s", args, code, want, contains, out)
		}
		return out
	}
	expect(ExitWaiting, "waits for a human", "--store", a, "run", taskFile)
	before := eventsOf(t, a, "mv")
	subBefore := eventsOf(t, a, "mv.draft")
	if len(before) == 0 || len(subBefore) == 0 {
		t.Fatal("no events to move")
	}

	file := filepath.Join(dir, "mv.export")
	expect(ExitOK, "", "--store", a, "export", "mv", "--chain", "-o", file)
	expect(ExitOK, "imported mv with 1 sub-agent:", "--store", b, "import", file)
	for _, db := range []string{a, b} {
		expect(ExitOK, "every chain replays", "--store", db, "verify")
	}
	expect(ExitOK, "completed", "--store", b, "show", "mv.draft")
	if got := eventsOf(t, b, "mv.draft"); !equalEvents(got, subBefore) {
		t.Fatalf("the sub-agent's events moved as\n%v\nwant\n%v", got, subBefore)
	}
	if got := eventsOf(t, b, "mv"); !equalEvents(got, before) {
		t.Fatalf("the events moved as\n%v\nwant\n%v", got, before)
	}

	// It goes on there.
	expect(ExitOK, "gate g1 before step ship approved", "--store", b, "approve", "mv", "g1")
	expect(ExitOK, "harness mv: completed", "--store", b, "resume", "mv")
	expect(ExitOK, "every chain replays", "--store", b, "verify")
	after := eventsOf(t, b, "mv")
	if len(after) <= len(before) || !equalEvents(after[:len(before)], before) {
		t.Fatalf("the log on the new store does not continue the moved one:\n%v", after)
	}
	var seq uint64
	for i, e := range after {
		if e.N != uint64(i+1) {
			t.Fatalf("event %d is numbered %d: %v", i+1, e.N, after)
		}
		if e.Type == event.Checkpoint {
			if e.Seq != seq+1 {
				t.Fatalf("checkpoint %d follows checkpoint %d (event %d)", e.Seq, seq, e.N)
			}
			seq = e.Seq
		}
	}
	if last := after[len(after)-1]; last.Type != event.Checkpoint || after[len(after)-2].To != "completed" {
		t.Fatalf("the log does not end with the completion: %+v", after[len(after)-3:])
	}
	gate := false
	for _, e := range after[len(before):] {
		gate = gate || e.Type == event.Gate && e.Action == "approved"
	}
	if !gate {
		t.Fatal("the approval is not in the log")
	}
	// The first store still holds the harness as it was.
	expect(ExitOK, "waiting for a human", "--store", a, "show", "mv")
	expect(ExitOK, "every chain replays", "--store", a, "verify")

	// A replacing import brings back the exported family: the completed run's events are gone.
	expect(ExitError, "already exists: mv, mv.draft", "--store", b, "import", file)
	expect(ExitOK, "replaced mv, mv.draft", "--store", b, "import", file, "--replace")
	if got := eventsOf(t, b, "mv"); !equalEvents(got, before) {
		t.Fatalf("after import --replace the log is\n%v\nwant\n%v", got, before)
	}
	expect(ExitOK, "waiting for a human", "--store", b, "show", "mv")
	expect(ExitOK, "every chain replays", "--store", b, "verify")

	// Stop works on a moved harness.
	expect(ExitOK, "imported mv", "--store", c, "import", file)
	expect(ExitOK, "harness mv: failed", "--store", c, "stop", "mv")
	expect(ExitOK, "stopped by request", "--store", c, "show", "mv")

	// A damaged export and a format-1 export are refused; the store stays as it was.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lsBefore := expect(ExitOK, "mv.draft", "--store", c, "ls")
	for i, damaged := range [][]byte{flip(data, 12), flip(data, len(data)/2), data[:len(data)-1], []byte("HECHAIN1\n\x02{}")} {
		p := filepath.Join(dir, "damaged.export")
		if err := os.WriteFile(p, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		want := "export is damaged"
		if i == 3 {
			want = "format-1 chain export"
		}
		expect(ExitError, want, "--store", c, "import", p, "--replace")
	}
	if ls := expect(ExitOK, "mv.draft", "--store", c, "ls"); ls != lsBefore {
		t.Fatalf("refused imports changed the store:\n%s\nwas\n%s", ls, lsBefore)
	}
}

func flip(data []byte, at int) []byte {
	d := bytes.Clone(data)
	d[at] ^= 0x10
	return d
}

func equalEvents(a, b []event.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, _ := json.Marshal(a[i])
		y, _ := json.Marshal(b[i])
		if !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// An export that is refused (a harness the store does not hold, a sub-agent) leaves the file
// -o names as it was: a good export kept there is not truncated or removed, and a pipe (as a
// device such as /dev/null) is not removed either. One that succeeds replaces the file whole,
// and one to a pipe writes through it.
func TestARefusedExportLeavesTheOutputFileAsItWas(t *testing.T) {
	dir := t.TempDir()
	taskFile := writeTask(t, dir, "mv.yaml", moveTask)
	db := filepath.Join(dir, "db")
	if code, out := cli(t, "--store", db, "run", taskFile); code != ExitWaiting {
		t.Fatalf("run: exit %d: %s", code, out)
	}
	file := filepath.Join(dir, "kept.export")
	if code, out := cli(t, "--store", db, "export", "mv", "--chain", "-o", file); code != ExitOK {
		t.Fatalf("export: exit %d: %s", code, out)
	}
	kept, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	// drain reads what an export writes to the pipe.
	drain := func() <-chan []byte {
		got := make(chan []byte, 1)
		go func() {
			b, _ := os.ReadFile(pipe)
			got <- b
		}()
		return got
	}
	refused := [][]string{
		{"export", "nosuch", "--chain", "-o", pipe},
		{"export", "mv.draft", "--chain", "-o", pipe},
		{"export", "nosuch", "--chain", "-o", file},
		{"export", "mv.draft", "--chain", "-o", file},
		{"export", "nosuch", "-o", file},
	}
	for _, args := range refused {
		got := drain()
		code, out := cli(t, append([]string{"--store", db}, args...)...)
		if code != ExitError {
			t.Fatalf("%v: exit %d: %s", args, code, out)
		}
		if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, kept) {
			t.Fatalf("%v (%s) changed the file it would have written: %d bytes, was %d (%v)", args, strings.TrimSpace(out), len(b), len(kept), err)
		}
		if fi, err := os.Lstat(pipe); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("%v (%s) removed the pipe it would have written to: %v", args, strings.TrimSpace(out), err)
		}
		if args[len(args)-1] != pipe {
			os.WriteFile(pipe, nil, 0) // ends the drain that nobody wrote to
		}
		<-got
	}
	got := drain()
	if code, out := cli(t, "--store", db, "export", "mv", "--chain", "-o", pipe); code != ExitOK {
		t.Fatalf("export to a pipe: exit %d: %s", code, out)
	}
	if b := <-got; !bytes.Equal(b, kept) {
		t.Fatalf("the export through a pipe is %d bytes, the one in a file %d", len(b), len(kept))
	}
	if code, out := cli(t, "--store", db, "export", "mv", "-o", file); code != ExitOK {
		t.Fatalf("export: exit %d: %s", code, out)
	}
	if b, err := os.ReadFile(file); err != nil || !json.Valid(b) {
		t.Fatalf("a JSON export over the file: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("an export left %s behind", e.Name())
		}
	}
}

// export --chain to standard output that is a terminal is refused as a usage error, saying to
// give -o or send the output to a file or a pipe: the export is binary (compressed records),
// and its bytes would reach the terminal as control sequences. The terminal gets the message
// alone. Through a pipe the same command writes the export.
func TestAChainExportIsNotWrittenToATerminal(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	if code, out := cli(t, "--store", db, "run", writeTask(t, dir, "mv.yaml", moveTask)); code != ExitWaiting {
		t.Fatalf("run: exit %d: %s", code, out)
	}
	shown, err := runOnTerminal(t, "--store", db, "export", "mv", "--chain")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitUsage {
		t.Fatalf("export --chain to a terminal: %v; the terminal showed %d bytes: %q", err, len(shown), shown[:min(len(shown), 200)])
	}
	if !strings.Contains(shown, "give -o FILE") || strings.Contains(shown, "HECHAIN") {
		t.Fatalf("the terminal showed %q", shown)
	}
	code, out := cli(t, "--store", db, "export", "mv", "--chain")
	if code != ExitOK || !strings.HasPrefix(out, "HECHAIN2\n") {
		t.Fatalf("export --chain through a pipe: exit %d, %d bytes", code, len(out))
	}
}
