package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"
	"go.yaml.in/yaml/v3"

	"github.com/harness-edge/harness-edge/internal/proptest"
)

// yamlTree is the node tree the YAML parser makes of data, one document.
func yamlTree(t *testing.T, data []byte) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("the YAML parser refuses valid JSON: %v\n%s", err, data)
	}
	return doc.Content[0]
}

// sameTree says where two node trees differ in what the decoder reads of them: kind, tag,
// value, style and line, node for node.
func sameTree(a, b *yaml.Node, at string) error {
	switch {
	case a.Kind != b.Kind:
		return fmt.Errorf("%s: kind %v, the YAML parser's %v", at, a.Kind, b.Kind)
	case a.ShortTag() != b.ShortTag():
		return fmt.Errorf("%s: tag %s, the YAML parser's %s", at, a.ShortTag(), b.ShortTag())
	case a.Value != b.Value:
		return fmt.Errorf("%s: value %q, the YAML parser's %q", at, a.Value, b.Value)
	case a.Style != b.Style:
		return fmt.Errorf("%s: style %v, the YAML parser's %v", at, a.Style, b.Style)
	case a.Line != b.Line:
		return fmt.Errorf("%s: line %d, the YAML parser's %d", at, a.Line, b.Line)
	case len(a.Content) != len(b.Content):
		return fmt.Errorf("%s: %d children, the YAML parser's %d", at, len(a.Content), len(b.Content))
	}
	for i := range a.Content {
		if err := sameTree(a.Content[i], b.Content[i], fmt.Sprintf("%s/%d", at, i)); err != nil {
			return err
		}
	}
	return nil
}

// jsonGen writes JSON documents at random: objects and arrays nested a few deep, strings of
// many scripts with the escapes JSON has, numbers of every form (negative zero, exponents,
// integers past 64 bits, one too large for a float), true, false, null, and white space with
// line breaks between any two tokens.
type jsonGen struct {
	r *rand.Rand
	b bytes.Buffer
}

func (g *jsonGen) space() {
	for range g.r.Intn(3) {
		g.b.WriteString([]string{" ", "\n", "\t", "\r\n", "  \n    ", "\r", "\n\r"}[g.r.Intn(7)])
	}
}

func (g *jsonGen) str() {
	pools := []string{"abc XYZ 09", "éüßçñ", "日本語한국어", "🙂🚀", `"\/`, ":#-{}[],&*!|>%@` '", "\u2028\u00a0"}
	// Not \/, which the YAML parser refuses (see TestJSONThatTheYAMLParserRefusedIsRead).
	escapes := []string{`\n`, `\t`, `\r`, `\b`, `\f`, `\"`, `\\`, `\u00e9`, `\u0041`, `\u20ac`, `\u0000`, `\u001f`}
	g.b.WriteByte('"')
	for range g.r.Intn(12) {
		if g.r.Intn(4) == 0 {
			g.b.WriteString(escapes[g.r.Intn(len(escapes))])
			continue
		}
		p := []rune(pools[g.r.Intn(len(pools))])
		r := p[g.r.Intn(len(p))]
		if r == '"' || r == '\\' {
			g.b.WriteByte('\\')
		}
		g.b.WriteRune(r)
	}
	g.b.WriteByte('"')
}

func (g *jsonGen) value(depth int) {
	g.space()
	switch k := g.r.Intn(9); {
	case k < 2 && depth < 4:
		g.b.WriteByte('{')
		for i := range g.r.Intn(5) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.space()
			g.str()
			// A key and its colon on one line: the YAML parser refuses a line break between
			// them (see TestJSONThatTheYAMLParserRefusedIsRead).
			g.b.WriteString([]string{"", " ", "\t"}[g.r.Intn(3)])
			g.b.WriteByte(':')
			g.value(depth + 1)
		}
		g.space()
		g.b.WriteByte('}')
	case k < 4 && depth < 4:
		g.b.WriteByte('[')
		for i := range g.r.Intn(5) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.value(depth + 1)
		}
		g.space()
		g.b.WriteByte(']')
	case k < 6:
		g.str()
	case k < 8:
		g.b.WriteString([]string{"0", "-0", "7", "-12", "3.25", "-0.5", "1e3", "2E-7", "6.02e+23", "9223372036854775807",
			"9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e400", "0.0"}[g.r.Intn(15)])
	default:
		g.b.WriteString([]string{"true", "false", "null"}[g.r.Intn(3)])
	}
	g.space()
}

// document is one JSON object.
func (g *jsonGen) document() []byte {
	g.b.Reset()
	// No tab before or after the object: the YAML parser refuses one there (see
	// TestJSONThatTheYAMLParserRefusedIsRead).
	g.b.WriteString([]string{"", " ", "\n", "\r\n  ", "\r"}[g.r.Intn(5)])
	g.b.WriteByte('{')
	for i := range 1 + g.r.Intn(6) {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.space()
		g.str()
		g.b.WriteByte(':')
		g.value(0)
	}
	g.b.WriteByte('}')
	g.b.WriteString([]string{"", " ", "\n", "\r\n  \n"}[g.r.Intn(4)])
	return bytes.Clone(g.b.Bytes())
}

// A JSON document's node tree, as jsonDocument builds it, is the YAML parser's node for node:
// the decoder reads the same task from it, with the same lines in its messages.
func TestJSONDocumentsReadAsTheYAMLParserReadsThem(t *testing.T) {
	check := func(data []byte) error {
		data, err := jsonSurrogates("t.json", data)
		if err != nil {
			return nil // refused before either parser reads it
		}
		got, ok := jsonDocument(data)
		if !ok {
			return fmt.Errorf("not read as JSON:\n%s", data)
		}
		if err := sameTree(got, yamlTree(t, data), ""); err != nil {
			return fmt.Errorf("%w\n%s", err, data)
		}
		return nil
	}
	props := proptest.Props(t, 500)
	props.Property("jsonDocument's tree is the YAML parser's", prop.ForAll(func(seed int64) bool {
		g := &jsonGen{r: rand.New(rand.NewSource(seed))}
		if err := check(g.document()); err != nil {
			t.Log(err)
			return false
		}
		return true
	}, gopter.Gen(func(p *gopter.GenParameters) *gopter.GenResult {
		return gopter.NewGenResult(p.Rng.Int63(), gopter.NoShrinker)
	})))
	props.TestingRun(t)

	// Tasks as the harness stores them: every example task, parsed and marshalled.
	examples, _ := filepath.Glob("../../examples/*.yaml")
	if len(examples) == 0 {
		t.Fatal("no example tasks")
	}
	for _, f := range examples {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := Parse(f, src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		stored, _ := json.Marshal(tk)
		indented, _ := json.MarshalIndent(tk, "", "  ")
		for _, data := range [][]byte{stored, indented} {
			if err := check(data); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
}

// Anything but one JSON object goes to the YAML parser, which reads or refuses it as before.
func TestOnlyOneJSONObjectIsReadAsJSON(t *testing.T) {
	for _, src := range []string{
		``, `   `, `[1, 2]`, `"a string"`, `42`, `agent: A`, `{"a": 1} {"b": 2}`, `{"a": 1}` + "\n---\n" + `{"b": 2}`,
		`{"a": 1,}`, `{"a": }`, `{a: 1}`, `{"a": 'x'}`, `{"a": 1} # a comment`, `{"a": "tab	inside"}`,
		`{"a": 1`, strings.Repeat(`{"a": `, maxNesting+2) + `1` + strings.Repeat(`}`, maxNesting+2),
	} {
		if _, ok := jsonDocument([]byte(src)); ok {
			t.Errorf("%.60q read as one JSON object", src)
		}
	}
	if _, ok := jsonDocument([]byte(" \n\t{\"a\": [1, {\"b\": null}]}\r\n ")); !ok {
		t.Error("a JSON object with white space around it is not read as JSON")
	}
}

// Valid JSON that the YAML parser refused as a syntax error is read: a slash escaped (PHP's
// json_encode escapes them by default), a line break between a key and its colon, a tab
// on a line before or after the object, a key longer than 1,024 characters (YAML's bound on
// a key written without "?"; a tool's arguments may have one, and json.Marshal writes it).
func TestJSONThatTheYAMLParserRefusedIsRead(t *testing.T) {
	long := strings.Repeat("k", 1500)
	for _, src := range []string{
		`{"agent": "A", "prompt": "read src\/main.go",`,
		`{"agent": "A", "prompt"` + "\n" + `: "read src/main.go",`,
		"\t" + `{"agent": "A", "prompt": "read src/main.go",`,
		`{"agent": "A", "prompt": "read src/main.go", "tools": {"t": {"command": ["true"], "parameters": {"` + long + `": "x"}}},`,
	} {
		src += `"agents": {"A": {"driver": "script", "script": {"plan": [{"id": "s", "description": "d", "agent": "A"}]}}}}` + "\n\t\n"
		tk, err := Parse("t.json", []byte(src))
		if err != nil || tk.Prompt != "read src/main.go" {
			t.Fatalf("%.80s...: %v", src, err)
		}
	}
}

// FuzzJSONDocument: whatever the bytes, jsonDocument never panics, and where it reads a
// document the YAML parser also reads, the two trees are the same.
func FuzzJSONDocument(f *testing.F) {
	for _, seed := range []string{
		`{"agent": "A", "agents": {"A": {"driver": "script"}}, "plan": [{"id": "s", "dependsOn": []}]}`,
		"{\n  \"a\": [1, -0, 2.5e-3, 1e400, true, false, null, \"\\u00e9\\ud83d\\ude80\\n\"],\n  \"b\": {}\n}\n",
		`{"a": "src\/main.go"}`, `{"a"` + "\n" + `: 1}`, `{"a": {"b": {"c": [[[]]]}}}`, `[1]`, `{"a": 1} x`,
		"{\r\"a\": 1,\r\n\"b\":\n\r[2]}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		data, err := DecodeText("f.json", "task file", src)
		if err != nil {
			return
		}
		if data, err = jsonSurrogates("f.json", data); err != nil {
			return
		}
		got, ok := jsonDocument(data)
		if !ok {
			return
		}
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
			return // valid JSON the YAML parser refuses: an escaped slash, a tab, a key on its own line
		}
		if bytes.Contains(data, []byte("\ufeff")) {
			// The YAML parser loses the character after a U+FEFF that ends near a 512-byte
			// boundary of its buffer (its tree, not this one, is wrong then).
			return
		}
		if err := sameTree(got, doc.Content[0], ""); err != nil {
			t.Fatalf("%v\n%q", err, data)
		}
	})
}

// A file whose lines end in a carriage return alone (an old Mac's) is named at the same lines
// as with line feeds, in every message: a syntax error, a lone surrogate, a wrong field; in
// YAML and JSON alike. Its text reads the same.
func TestOldMacLineBreaksNameTheSameLines(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"syntax.json", "{\n\"agent\": \"A\",\n\"prompt\": \"p\"\n\"x\": 1\n}\n", "syntax.json:4:"},
		{"surrogate.json", "{\n\"agent\": \"A\",\n\"prompt\": \"\\ud83d\"\n}\n", "surrogate.json:3:"},
		{"field.json", "{\n\"agent\": \"A\",\n\"bogus\": 1\n}\n", "field.json:3:"},
		{"syntax.yaml", "agent: A\nagents:\n  A: {driver: script\nprompt: p\n", "syntax.yaml:"},
		{"field.yaml", "agent: A\n\nbogus: 1\n", "field.yaml:3:"},
	} {
		_, lf := Parse(c.name, []byte(c.src))
		_, cr := Parse(c.name, []byte(strings.ReplaceAll(c.src, "\n", "\r")))
		if lf == nil || cr == nil || !strings.Contains(lf.Error(), c.want) || cr.Error() != lf.Error() {
			t.Errorf("%s: with line feeds %v\nwith carriage returns %v", c.name, lf, cr)
		}
	}
	src := "agent: A\rprompt: |\r  two\r  lines\ragents: {A: {driver: script, script: {plan: [{id: s, description: d, agent: A}]}}}\r"
	tk, err := Parse("t.yaml", []byte(src))
	if err != nil || tk.Prompt != "two\nlines\n" {
		t.Fatalf("%v, prompt %q", err, tk.Prompt)
	}
}
