package task_test

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// utf16File is text in UTF-16 with its byte-order mark, as PowerShell's `>` and Notepad's
// "Unicode" write it (little-endian) or big-endian.
func utf16File(text string, bigEndian bool) []byte {
	var order binary.AppendByteOrder = binary.LittleEndian
	if bigEndian {
		order = binary.BigEndian
	}
	out := order.AppendUint16(nil, 0xFEFF)
	for _, u := range utf16.Encode([]rune(text)) {
		out = order.AppendUint16(out, u)
	}
	return out
}

const encodedTask = `id: enc
prompt: "Café ☕ 𝄞: write the report"
agent: A
agents:
  A:
    driver: script
    script:
      plan:
        - {id: s1, description: "naïve step", agent: A}
`

// A task file in UTF-16 with a byte-order mark, either endianness, or in UTF-8 with one, reads
// as the same task as the plain UTF-8 file, its non-ASCII text (a character outside the BMP
// too) intact; reading it from disk gives UTF-8, which is what submit sends on.
func TestATaskFileInUTF16WithAByteOrderMarkReadsAsInUTF8(t *testing.T) {
	want, err := task.Parse("plain.yaml", []byte(encodedTask))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"utf16le.yaml":  utf16File(encodedTask, false),
		"utf16be.yaml":  utf16File(encodedTask, true),
		"utf8bom.yaml":  append([]byte("\xef\xbb\xbf"), encodedTask...),
		"utf16bom.yaml": utf16File("\ufeff"+encodedTask, false),
	} {
		got, err := task.Parse(name, data)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v\n%+v\nwant %+v", name, err, got, want)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if text, err := task.ReadFile(path); err != nil || string(text) != encodedTask {
			t.Errorf("%s read from disk: %q, %v", name, text, err)
		}
	}
	// Problems are reported at their lines, as in the UTF-8 file.
	_, err = task.Parse("bad.yaml", utf16File(strings.Replace(encodedTask, "agent: A\n", "agent: A\nautonomy: 9\n", 1), false))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:4: autonomy: 9 is outside 1..5") {
		t.Fatalf("a problem in a UTF-16 file: %v", err)
	}
}

// What cannot be read for sure is refused, naming the file and the encoding, and why.
func TestATaskFileInAnEncodingThatCannotBeReadIsRefusedNamingIt(t *testing.T) {
	le := utf16File(encodedTask, false)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"odd.yaml", le[:len(le)-1], "odd.yaml: the task file starts with a UTF-16LE byte-order mark but is not UTF-16LE: it has an odd number of bytes"},
		{"lone.yaml", append(utf16File("id: x\n", true), 0xDC, 0x00), "lone.yaml: the task file starts with a UTF-16BE byte-order mark but is not UTF-16BE: a lone surrogate (0xDC00) on line 2"},
		{"u32.yaml", append([]byte("\xff\xfe\x00\x00"), "i\x00\x00\x00"...), "u32.yaml: the task file is UTF-32 (it starts with a UTF-32 byte-order mark): save it as UTF-8 (or UTF-16)"},
		{"nobom.yaml", utf16File(encodedTask, false)[2:], "nobom.yaml: the task file holds NUL bytes (the first on line 1): it looks like UTF-16 or UTF-32 without a byte-order mark"},
		// A UTF-16 file's bytes put in a JSON string as if UTF-8: the mark became two U+FFFD.
		{"sent.yaml", []byte(strings.ToValidUTF8(string(le), "\ufffd")), "sent.yaml: the task file holds NUL bytes (the first on line 1): it looks like UTF-16 or UTF-32 without a byte-order mark, or such a file read as UTF-8"},
	} {
		_, err := task.Parse(c.name, c.data)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %s", c.name, err, c.want)
		}
	}
	// A plan change is read alike.
	if _, _, err := task.ParsePlanChange("fix.yaml", le[:len(le)-1], nil, nil); err == nil || !strings.HasPrefix(err.Error(), "fix.yaml: the plan change starts with a UTF-16LE byte-order mark") {
		t.Fatalf("plan change: %v", err)
	}
}

// A UTF-16 file within the limit on disk that is over it as UTF-8 is refused, saying so.
func TestAUTF16TaskFileOverTheLimitAsUTF8IsRefusedSayingSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wide.yaml")
	// 1.5 M characters of three UTF-8 bytes each: 3 MB of UTF-16, 4.5 MB of UTF-8.
	if err := os.WriteFile(path, utf16File("# "+strings.Repeat("☕", 1_500_000)+"\n", false), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := task.ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), "the task file is 4500003 bytes once decoded from UTF-16 to UTF-8, over the 4 MiB (4194304 bytes) a task file may be") {
		t.Fatalf("read: %v", err)
	}
}

// A task file or a plan change in Latin-1 (or any text that is not UTF-8) is refused naming the
// file, that it is not UTF-8, and the line and byte offset of the first byte that is not, rather
// than with the YAML library's error; a UTF-8 byte-order mark counts in the offset, as it is in
// the file.
func TestATaskFileThatIsNotUTF8IsRefusedNamingTheFirstBadByte(t *testing.T) {
	latin1 := "id: x\nprompt: caf\xe9 au lait\nagent: A\nagents:\n  A: {driver: script, script: {}}\n"
	for _, c := range []struct {
		name string
		data string
		want string
	}{
		{"l1.yaml", latin1, "l1.yaml: the task file is not UTF-8: the byte 0xE9 on line 2 (byte offset 17) is not valid UTF-8"},
		{"bom.yaml", "\xef\xbb\xbf" + latin1, "bom.yaml: the task file is not UTF-8: the byte 0xE9 on line 2 (byte offset 20) is not valid UTF-8"},
		{"cut.yaml", "id: x\nprompt: \xe2\x98\n", "cut.yaml: the task file is not UTF-8: the byte 0xE2 on line 2 (byte offset 14)"},
	} {
		_, err := task.Parse(c.name, []byte(c.data))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %s", c.name, err, c.want)
		}
	}
	_, _, err := task.ParsePlanChange("fix.yaml", []byte("skip: [caf\xe9]\n"), nil, nil)
	if want := "fix.yaml: the plan change is not UTF-8: the byte 0xE9 on line 1 (byte offset 10)"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("plan change: %v\nwant %s", err, want)
	}
}

// A JSON task whose characters outside the Basic Multilingual Plane are escaped as UTF-16
// surrogate pairs (as Python's json.dumps writes them) reads with those characters; a lone half
// of a pair is refused with its line and column; an escaped backslash before "ud83d" stays text.
func TestJSONSurrogatePairEscapesReadAsTheirCharacters(t *testing.T) {
	src := "{\"id\": \"emoji\",\n \"prompt\": \"ship it \\ud83d\\ude80 \\u2014 caf\\u00e9 \\\\ud83d\",\n" +
		" \"agent\": \"A\", \"agents\": {\"A\": {\"driver\": \"script\", \"script\": {\"plan\": [{\"id\": \"s1\", \"description\": \"\\uD834\\uDD1E clef\", \"agent\": \"A\"}]}}}}\n"
	tk, err := task.Parse("emoji.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if want := `ship it 🚀 — café \ud83d`; tk.Prompt != want {
		t.Errorf("prompt %q, want %q", tk.Prompt, want)
	}
	if got := tk.Agents["A"].Script.Plan[0].Description; got != "𝄞 clef" {
		t.Errorf("description %q", got)
	}
	for name, c := range map[string]struct{ src, want string }{
		"lone high":     {"{\"id\": \"x\",\n\"prompt\": \"a \\ud83d b\", \"agent\": \"A\"}", `lone.json:2: column 14: \ud83d is half of a UTF-16 surrogate pair`},
		"low first":     {"{\"prompt\": \"\\udE80\\ud83d\"}", `lone.json:1: column 13: \udE80 is half`},
		"high, no low":  {"{\"prompt\": \"\\ud83d\\u0041\"}", `lone.json:1: column 13: \ud83d is half`},
		"at the end":    {"{\"prompt\": \"\\ud83d\"}", `lone.json:1: column 13: \ud83d is half`},
		"in a key":      {"{\"\\ud83d\": 1}", `lone.json:1: column 3: \ud83d is half`},
		"YAML's escape": {"id: y\nprompt: \"rocket \\ud83d\\ude80\"\n", `lone.json:2: found invalid Unicode character escape code: a \u escape in a double-quoted string is a code point`},
		"one line":      {`{"id": "x", "prompt": "a"`, `lone.json:1: column 25: not valid JSON: unexpected end of JSON input`},
		// Columns count characters, as editors do: 日本語 is three, not nine bytes.
		"after CJK": {`{"prompt": "日本語 \ud800"}`, `lone.json:1: column 17: \ud800 is half`},
		// JSON with a slip is read as YAML, which refuses the pair: the slip is named first.
		"a comma too many": {"{\"id\": \"x\",\n \"prompt\": \"\\ud83d\\ude80\",\n}\n",
			`lone.json:3: column 1: not valid JSON: invalid character '}' looking for beginning of object key string (a file that is not valid JSON is read as YAML, and that fails too, at line 2: found invalid Unicode character escape code); once it is valid JSON`},
		"a comma too few": {`{"id": "x", "prompt": "\ud83d\ude80" "agent": "A"}`,
			`lone.json:1: column 38: not valid JSON: invalid character '"' after object key:value pair`},
	} {
		_, err := task.Parse("lone.json", []byte(c.src))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q...", name, err, c.want)
		}
	}
}

// A syntax error names the line to look at: for a file meant as JSON, the line and column
// where encoding/json finds it invalid; for YAML, the line of the mapping or list the parser
// was reading when it found something missing (its messages count lines from 0), and the line
// of a character that cannot be there.
func TestSyntaxErrorsNameTheLineOfTheMistake(t *testing.T) {
	for name, want := range map[string]string{
		// { opened on line 4 and never closed.
		"flow.yaml:id: x\nagent: A\nagents:\n  A: {driver: script, tools: [read_file]\n  B: 1\n": "flow.yaml:4: did not find expected ',' or '}'",
		// [ opened on line 6 and never closed.
		"list.yaml:id: x\nagent: A\nagents:\n  A:\n    driver: script\n    tools: [read_file\n    x: 1\n": "list.yaml:6: did not find expected ',' or ']'",
		// A list begun on line 4 and a key in it on line 5.
		"mix.yaml:id: x\nagent: A\nagents:\n  - a\n  b: 2\n": "mix.yaml:4: did not find expected '-' indicator",
		// A flow mapping of YAML (not JSON) whose } is missing.
		"flowtop.yaml:{id: x,\nagent: A\n":            "flowtop.yaml:2: did not find expected ',' or '}'",
		"tab.yaml:id: x\nagent: A\nagents:\n\tA: 1\n": "tab.yaml:4: found character that cannot start any token",
		// A comma missing at the end of line 3: JSON finds it at the next key.
		"comma.json:{\n  \"id\": \"x\",\n  \"agent\": \"A\"\n  \"prompt\": \"p\"\n}\n": "comma.json:4: column 3: not valid JSON: invalid character '\"' after object key:value pair",
		// The same in a file not named .json that starts as JSON.
		"comma.task:{\"id\": \"x\",\n\"agent\": \"A\" \"prompt\": \"p\"}\n": "comma.task:2: column 14: not valid JSON",
	} {
		file, src, _ := strings.Cut(name, ":")
		_, err := task.Parse(file, []byte(src))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q...", file, err, want)
		}
	}
}

// A plan change in ASCII JSON reads its escaped surrogate pairs as a task file does.
func TestAPlanChangeReadsJSONSurrogatePairs(t *testing.T) {
	current := []task.CurrentStep{{PlanStep: task.PlanStep{ID: "s1", Description: "one", Agent: "A"}}}
	agents := map[string]*task.Agent{"A": {Driver: "script"}}
	c, _, err := task.ParsePlanChange("change.json", []byte(`{"insert": [{"id": "s2", "description": "deploy \ud83d\ude80", "agent": "A"}]}`), current, agents)
	if err != nil || c.Insert[0].Description != "deploy 🚀" {
		t.Fatalf("%v %+v", err, c)
	}
	_, _, err = task.ParsePlanChange("change.json", []byte(`{"insert": [{"id": "s2", "description": "\ude80", "agent": "A"}]}`), current, agents)
	if err == nil || !strings.HasPrefix(err.Error(), `change.json:1: column 42: \ude80 is half`) {
		t.Fatalf("%v", err)
	}
}

// LoneSurrogate finds the first escape of half a surrogate pair in JSON text, skips whole pairs
// and escaped backslashes, and never panics on text cut anywhere.
func TestLoneSurrogateFindsHalfAPairOnly(t *testing.T) {
	for in, want := range map[string]int{
		`"a"`: -1, `"\ud83d\ude80"`: -1, `"\\ud800"`: -1, `"\u0041\ud800"`: 7, `"\udfff"`: 1, `"\ud800\u0041"`: 1,
		`"\ud800\ud800"`: 1, `"\uD83D\uDE80 \uDC00"`: 14, `"x\\\ud800"`: 4,
	} {
		if got := task.LoneSurrogate([]byte(in)); got != want {
			t.Errorf("LoneSurrogate(%s) = %d, want %d", in, got, want)
		}
		for n := range len(in) {
			task.LoneSurrogate([]byte(in[:n]))
		}
	}
}

// A JSON task may hold as they are the characters YAML takes only escaped (DEL, the C1
// controls, U+FFFE) or folds as line breaks (NEL, U+2028, U+2029): json.Marshal writes a
// prompt's U+0080 so. Such a task reads with
// them, as written escaped or not, and a task stored as JSON reads back the same.
func TestJSONHoldsUnescapedWhatYAMLTakesOnlyEscaped(t *testing.T) {
	prompt := "a\u0080b\u007fc\u009fd\u0085e\ufffef\u2028g\u2029h — ok\n"
	for name, src := range map[string]string{
		"escaped":     `{"prompt": "a\u0080b\u007fc\u009fd\u0085e\ufffef\u2028g\u2029h \u2014 ok\n", "agent": "A", "agents": {"A": {"driver": "script", "script": {}}}}`,
		"as they are": "{\"prompt\": \"" + strings.ReplaceAll(prompt, "\n", `\n`) + "\", \"agent\": \"A\", \"agents\": {\"A\": {\"driver\": \"script\", \"script\": {}}}}",
	} {
		tk, err := task.Parse(name+".json", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tk.Prompt != prompt {
			t.Fatalf("%s: prompt %q, want %q", name, tk.Prompt, prompt)
		}
		stored, err := json.Marshal(tk)
		if err != nil {
			t.Fatal(err)
		}
		back, err := task.Parse("the stored task", stored)
		if err != nil || back.Prompt != prompt {
			t.Fatalf("%s: the stored task reads back with the prompt %q, %v", name, back.Prompt, err)
		}
	}
}
