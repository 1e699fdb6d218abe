package cli

import (
	"bytes"
	bo "encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// inUTF16 is text in UTF-16LE with its byte-order mark, as Windows PowerShell's `>` writes it.
func inUTF16(text string) []byte {
	out := bo.LittleEndian.AppendUint16(nil, 0xFEFF)
	for _, u := range utf16.Encode([]rune(text)) {
		out = bo.LittleEndian.AppendUint16(out, u)
	}
	return out
}

const wideProse = "Café ☕ 𝄞: write the report"

// A task file in UTF-16 with a byte-order mark (and one in UTF-8 with a mark) runs the same task
// whichever way it comes: `run`, `submit` to the daemon, the daemon's HTTP API (which takes the
// file's text: a leading U+FEFF is the mark) and, as a prompt file, `loop`. The text arrives
// intact, non-ASCII included. A UTF-16 file's bytes sent to the API as if they were UTF-8 are
// refused, naming the file and why, and create nothing.
func TestAUTF16TaskFileRunsTheSameThroughRunSubmitTheAPIAndLoop(t *testing.T) {
	dir := t.TempDir()
	src := func(id string) string {
		return `id: ` + id + `
prompt: "` + wideProse + `"
agent: A
workspace: ` + filepath.Join(dir, "ws") + `
agents:
  A:
    driver: script
    script:
      plan:
        - {id: s1, description: "` + wideProse + `", agent: A}
      steps:
        s1: [{output: "rédigé"}]
`
	}
	check := func(how string, st *statefmt.HarnessState) {
		t.Helper()
		if st.Status != statefmt.StatusCompleted || st.Plan.Steps[0].Description != wideProse || deref(st.Plan.Steps[0].Output) != "rédigé" {
			t.Errorf("%s: %s, step %+v", how, st.Status, st.Plan.Steps[0])
		}
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	db := filepath.Join(dir, "run")
	expectIn(t, db, ExitOK, "harness r16: completed", "run", write("r16.yaml", inUTF16(src("r16"))))
	expectIn(t, db, ExitOK, "harness r8: completed", "run", write("r8.yaml", append([]byte("\xef\xbb\xbf"), src("r8")...)))
	check("run, UTF-16", storeState(t, db, "r16"))
	check("run, UTF-8 with a mark", storeState(t, db, "r8"))
	expectIn(t, db, ExitOK, wideProse, "plan", "r16")

	db = filepath.Join(dir, "daemon")
	d := startDaemon(t, db)
	expectIn(t, db, ExitOK, "submitted: harness s16", "submit", write("s16.yaml", inUTF16(src("s16"))))
	expectIn(t, db, ExitOK, "submitted: harness s8", "submit", write("s8.yaml", append([]byte("\xef\xbb\xbf"), src("s8")...)))
	check("submit, UTF-16", waitStatus(t, db, "s16", statefmt.StatusCompleted))
	check("submit, UTF-8 with a mark", waitStatus(t, db, "s8", statefmt.StatusCompleted))
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	body, _ := json.Marshal(control.SubmitRequest{Task: "\ufeff" + src("h8"), Name: "h8.yaml"})
	if code, resp := d.http("POST", "/v1/harnesses", token, body); code != 201 {
		t.Fatalf("the API, a text with its mark: %d %s", code, resp)
	}
	check("the API", waitStatus(t, db, "h8", statefmt.StatusCompleted))
	body, _ = json.Marshal(control.SubmitRequest{Task: string(inUTF16(src("h16"))), Name: "h16.yaml"})
	code, resp := d.http("POST", "/v1/harnesses", token, body)
	if want := "h16.yaml: the task file holds NUL bytes (the first on line 1): it looks like UTF-16 or UTF-32 without a byte-order mark, or such a file read as UTF-8"; code != 400 || !strings.Contains(resp, want) {
		t.Fatalf("the API, UTF-16 bytes sent as UTF-8: %d %s\nwant 400 %q", code, resp, want)
	}
	if code, out, _ := run(t, "--store", db, "show", "h16"); code == ExitOK {
		t.Fatalf("a refused task was stored:\n%s", out)
	}

	// loop reads its prompt file as run reads a task file.
	for name, data := range map[string][]byte{"p16.md": inUTF16(wideProse + "\n"), "p8.md": append([]byte("\xef\xbb\xbf"), wideProse+"\n"...)} {
		code, out, stderr := run(t, "--store", filepath.Join(dir, "loop"), "loop", "--id", "l", "--promise", "DONE", "--prompt-file", write(name, data),
			"--workspace", mkdir(t, filepath.Join(dir, "lws")), "--print-task", "--", "true")
		if code != ExitOK {
			t.Fatalf("loop --prompt-file %s: exit %d: %s", name, code, stderr)
		}
		if lt, err := task.Parse("printed", []byte(out)); err != nil || lt.Prompt != wideProse {
			t.Errorf("loop --prompt-file %s: prompt %q, %v", name, lt.Prompt, err)
		}
	}
}

// A task file or a plan change in Latin-1 is refused by `run`, `submit` and `replan` naming the
// file, that it is not UTF-8 and where its first byte that is not is; the daemon's HTTP API,
// sent the file's bytes as they are in a JSON string, refuses the body (JSON must be UTF-8)
// naming the byte's offset in it. Nothing is created or changed.
func TestALatin1TaskFileIsRefusedNamingTheByteThroughRunSubmitTheAPIAndReplan(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	latin1 := "id: l1\nprompt: caf\xe9 au lait\nagent: A\nagents:\n  A: {driver: script, script: {}}\n"
	const where = "the task file is not UTF-8: the byte 0xE9 on line 2 (byte offset 18)"
	path := writeTask(t, dir, "l1.yaml", latin1)
	expectIn(t, db, ExitError, path+": "+where, "run", path)
	expectIn(t, db, ExitError, "compiler not found", "run", writeTask(t, dir, "f.yaml", strings.ReplaceAll(flakyTask, "%s", "f")))
	before := storeState(t, db, "f")
	change := writeTask(t, dir, "fix.yaml", "skip: [ship]\nreason: caf\xe9\n")
	const changeWhere = "the plan change is not UTF-8: the byte 0xE9 on line 2 (byte offset 24)"
	expectIn(t, db, ExitError, change+": "+changeWhere, "replan", "f", change)
	if after := storeState(t, db, "f"); !sameState(before, after) {
		t.Fatal("a refused plan change changed the harness")
	}

	d := startDaemon(t, db)
	expectIn(t, db, ExitError, path+": "+where, "submit", path)
	expectIn(t, db, ExitError, change+": "+changeWhere, "replan", "f", change)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	// The file's bytes as they are in a JSON string, an escape before the bad byte.
	body := []byte(`{"name": "l1.yaml", "task": "` + strings.ReplaceAll(strings.Replace(latin1, "id: l1\n", `id: \u006c1\n`, 1), "\n", `\n`) + `"}`)
	notUTF8 := func(body []byte) string {
		return fmt.Sprintf("the request body is not UTF-8: the byte 0xE9 at byte offset %d", bytes.IndexByte(body, 0xe9))
	}
	if code, resp := d.http("POST", "/v1/harnesses", token, body); code != 400 || !strings.Contains(resp, notUTF8(body)) {
		t.Fatalf("the API, a Latin-1 task: %d %s\nwant 400 %q", code, resp, notUTF8(body))
	}
	body = []byte(`{"name": "fix.yaml", "change": "skip: [ship]\nreason: caf` + "\xe9" + `\n"}`)
	if code, resp := d.http("POST", "/v1/harnesses/f/replan", token, body); code != 400 || !strings.Contains(resp, notUTF8(body)) {
		t.Fatalf("the API, a Latin-1 plan change: %d %s\nwant 400 %q", code, resp, notUTF8(body))
	}
	if code, out, _ := run(t, "--store", db, "show", "l1"); code == ExitOK {
		t.Fatalf("a refused task was stored:\n%s", out)
	}
	expectIn(t, db, ExitOK, "ship   A      blocked", "plan", "f")
}

// A JSON state saved with a byte-order mark (an exported state edited in an editor on Windows:
// UTF-8 with the mark, or UTF-16) is checked and imported as the same state without one, its
// non-ASCII text intact; a marked file that is not UTF-8 is refused naming the byte.
func TestAJSONStateSavedWithAByteOrderMarkImports(t *testing.T) {
	dir := t.TempDir()
	src := strings.Replace(moveTask, "agent: A\n", "agent: A\nprompt: \""+wideProse+"\"\n", 1)
	db := filepath.Join(dir, "db")
	if code, out := cli(t, "--store", db, "run", writeTask(t, dir, "mv.yaml", src)); code != ExitWaiting {
		t.Fatalf("run: exit %d: %s", code, out)
	}
	plain := filepath.Join(dir, "mv.json")
	if code, out := cli(t, "--store", db, "export", "mv", "-o", plain); code != ExitOK {
		t.Fatalf("export: exit %d: %s", code, out)
	}
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	want, err := statefmt.DecodeJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"utf8-bom.json": append([]byte("\xef\xbb\xbf"), data...),
		"utf16.json":    inUTF16(string(data)),
	} {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if code, out := cli(t, "state", "check", file); code != ExitOK || !strings.Contains(out, "valid HarnessState") {
			t.Fatalf("state check %s: exit %d: %s", name, code, out)
		}
		other := filepath.Join(dir, "db-"+name)
		if code, out := cli(t, "--store", other, "import", file); code != ExitOK || !strings.Contains(out, "imported mv") {
			t.Fatalf("import %s: exit %d: %s", name, code, out)
		}
		code, out := cli(t, "--store", other, "show", "mv", "--json")
		if code != ExitOK {
			t.Fatalf("show after importing %s: exit %d: %s", name, code, out)
		}
		got, err := statefmt.DecodeJSON([]byte(out))
		if err != nil || got.Status != want.Status || got.UpdatedAt != want.UpdatedAt || len(got.Plan.Steps) != len(want.Plan.Steps) {
			t.Fatalf("imported from %s: %+v, %v", name, got, err)
		}
	}
	latin := filepath.Join(dir, "latin.json")
	if err := os.WriteFile(latin, []byte("\xef\xbb\xbf{\"schemaVersion\": 1, \"harnessId\": \"caf\xe9\"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"state", "check", latin}, {"--store", filepath.Join(dir, "db-latin"), "import", latin}} {
		if code, out := cli(t, args...); code != ExitError || !strings.Contains(out, "latin.json: the state file is not UTF-8: the byte 0xE9 on line 1") {
			t.Fatalf("%v: exit %d: %s", args, code, out)
		}
	}
}
