package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Escapes from files reach the terminal as visible text: a title, a screen clear and an OSC 52
// clipboard write in a state's agent name are shown, not sent; --json stays exact JSON.
func TestCLIEscapesControlCharacters(t *testing.T) {
	dir := t.TempDir()
	evil := "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZWNobyBoaQ==\x07\u009b31m"
	seed, err := os.ReadFile("../../../../statefmt/testdata/seed-example.json")
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal(seed, &state); err != nil {
		t.Fatal(err)
	}
	state["agentName"] = evil
	b, _ := json.Marshal(state)
	stateFile := filepath.Join(dir, "state.json")
	if err := os.WriteFile(stateFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	Main([]string{"state", "check", stateFile}, &out, &errOut)
	all := out.String() + errOut.String()
	if strings.ContainsAny(all, "\x1b\x07") || strings.Contains(all, "\u009b") {
		t.Fatalf("control characters reached the terminal: %q", all)
	}
	if !strings.Contains(all, `\x1b]0;pwned\x07`) || !strings.Contains(all, `\u009b`) {
		t.Fatalf("the escapes are not shown: %q", all)
	}
	out.Reset()
	errOut.Reset()
	Main([]string{"state", "check", "--json", stateFile}, &out, &errOut)
	var v struct{ AgentName string }
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &v); err != nil || v.AgentName != evil {
		t.Fatalf("--json: %v %q", err, out.String())
	}
}

func TestTermWriterSplitsRunesAcrossWrites(t *testing.T) {
	var b bytes.Buffer
	w := &termWriter{w: &b}
	s := "a\u009bé\tb\r\n\x7f"
	for i := range len(s) {
		w.Write([]byte{s[i]})
	}
	w.Flush()
	if got, want := b.String(), `a\u009bé`+"\tb"+`\x0d`+"\n"+`\x7f`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// The bidi controls that reorder a line as a terminal shows it (a right-to-left override turns
// "gnp.exe" around) are shown escaped; right-to-left text and marks pass as they are.
func TestTermWriterShowsBidiControlsEscaped(t *testing.T) {
	var b bytes.Buffer
	w := &termWriter{w: &b}
	_, _ = w.Write([]byte("report\u202egnp.exe \u2066x\u2069 \u202a\u202c שלום مرحبا \u200f."))
	want := `report\u202egnp.exe \u2066x\u2069 \u202a\u202c שלום مرحبا ` + "\u200f."
	if b.String() != want {
		t.Fatalf("%q\nwant %q", b.String(), want)
	}
}
