package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// The decoder walks the YAML node tree into a Task itself, rather than leaving it to a YAML
// library's reflection: it costs time linear in the file, reports every unknown key and every
// value of the wrong type (not just the first) with its field and line, and refuses values
// JSON cannot store (NaN, infinities), since the harness stores the task as JSON.

// lineErr is a problem found while decoding: a fieldErr with the line it is on.
type lineErr struct {
	fieldErr
	line int
	lost bool // the value at path was not decoded
}

// maxNesting and the node budget (minNodes, or 4 per byte of the file) bound what aliases can
// make of a small file: a cycle, or a billion laughs.
const (
	maxNesting = 1000
	minNodes   = 1 << 16
)

type decoder struct {
	errs     []lineErr
	nodes    int
	maxNodes int
	stopped  bool
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// decodeFile parses data as one YAML (or JSON) document and decodes it into t. It returns the
// document's root (for locating validation problems) and the problems found, or a syntax
// error that stops everything.
func decodeFile(name string, data []byte, t *Task) (*yaml.Node, []lineErr, error) {
	data, err := DecodeText(name, "task file", data)
	if err != nil {
		return nil, nil, err
	}
	data = lineFeeds(data)
	if data, err = jsonSurrogates(name, data); err != nil {
		return nil, nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, &Error{File: name, Msg: "the task file is empty"}
	}
	root, err := readDocument(name, data, "the task file is empty",
		"a second YAML document: a task file holds one (remove the '---' before it, or split the file)")
	if err != nil {
		return nil, nil, err
	}
	d := &decoder{maxNodes: max(minNodes, 4*len(data))}
	d.value(root, reflect.ValueOf(t).Elem(), nil, 0)
	return root, d.errs, nil
}

// readDocument parses data, one YAML or JSON document, into its node tree: with jsonDocument
// when it is one JSON object, else with the YAML parser. empty and second are the refusals of
// a document without content and of a second document after the first.
func readDocument(name string, data []byte, empty, second string) (*yaml.Node, error) {
	if root, ok := jsonDocument(data); ok {
		return root, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: name, Msg: empty}
		}
		return nil, syntaxErr(name, data, err)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxErr(name, data, err)
	default:
		line := more.Line
		if len(more.Content) > 0 {
			line = more.Content[0].Line
		}
		// An empty document after a last "---" starts past the file's last line.
		return nil, &Error{File: name, Line: min(line, lastLine(data)), Msg: second}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	return root, nil
}

// overflows says whether s is a number too large for a float64.
func overflows(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return errors.Is(err, strconv.ErrRange)
}

// lastLine is the number of data's last line that holds anything.
func lastLine(data []byte) int { return 1 + bytes.Count(bytes.TrimRight(data, "\r\n"), []byte("\n")) }

// syntaxErr turns the parser's error ("yaml: line 3: ...") into an Error with its line. The
// parser names no line for a problem on the first one, so a document of one line (a JSON task
// written without newlines) gets line 1. A file that starts as JSON is named at the line and
// column where encoding/json finds it invalid: a comma too many or too few, a quote missing,
// which is what to fix; YAML, which reads it then, fails further on or around it.
func syntaxErr(name string, data []byte, err error) error {
	first, _, _ := strings.Cut(err.Error(), "\n")
	e := &Error{File: name, Msg: strings.TrimPrefix(first, "yaml: ")}
	lines := lastLine(data)
	if m := yamlLine().FindStringSubmatch(first); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = m[2]
		if yamlParserProblem(e.Msg) {
			// The parser (not the scanner) counts its lines from 0 in its messages: it named the
			// line before the mapping or list it was reading.
			e.Line++
		}
		// At the end of a file without a last newline, that line is one past the last.
		e.Line = min(e.Line, lines)
	} else if lines == 1 {
		e.Line = 1
	}
	surrogate := strings.HasSuffix(e.Msg, "found invalid Unicode character escape code")
	if line, col, why, ok := notJSON(name, data); ok {
		yamlSays := e.Msg
		if e.Line > 0 {
			yamlSays = fmt.Sprintf("line %d: %s", e.Line, e.Msg)
		}
		e.Line = line
		e.Msg = fmt.Sprintf("column %d: not valid JSON: %s (a file that is not valid JSON is read as YAML, and that fails too, at %s)", col, why, yamlSays)
		if surrogate {
			e.Msg += "; once it is valid JSON, its surrogate pairs (\\ud83d\\ude80) read as their characters"
		}
		return e
	}
	if surrogate {
		e.Msg += ": a \\u escape in a double-quoted string is a code point, and \\uD800-\\uDFFF (UTF-16 surrogates) are none; " +
			"write a character outside the Basic Multilingual Plane as itself or as \\U0001F680"
	}
	return e
}

// yamlParserProblems are the YAML parser's messages (a mapping or list not closed or not
// indented as it should be), as against its scanner's (a character that cannot be there).
var yamlParserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected <document start>", "did not find expected <stream-start>", "did not find expected key",
	"did not find expected node content", "found duplicate %TAG directive", "found duplicate %YAML directive",
	"found incompatible YAML document", "found undefined tag handle",
}

func yamlParserProblem(msg string) bool { return slices.Contains(yamlParserProblems, msg) }

// fail reports a value at path that could not be decoded (it is left out of the task).
func (d *decoder) fail(n *yaml.Node, path []string, msg string) {
	d.errs = append(d.errs, lineErr{fieldErr{append([]string(nil), path...), msg}, n.Line, true})
}

// note reports a problem in the mapping at path that leaves its decoded values as they are.
func (d *decoder) note(n *yaml.Node, path []string, msg string) {
	d.errs = append(d.errs, lineErr{fieldErr{append([]string(nil), path...), msg}, n.Line, false})
}

var (
	durationType  = reflect.TypeFor[Duration]()
	workspaceType = reflect.TypeFor[Workspace]()
	anyType       = reflect.TypeFor[any]()
)

// value decodes n into v. A null leaves v as it is (its zero value).
func (d *decoder) value(n *yaml.Node, v reflect.Value, path []string, depth int) {
	n = d.deref(n, path, depth)
	if n == nil || isNull(n) {
		return
	}
	if v.Type() == durationType {
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a duration (like 50ms, 5m or 8h), found "+describe(n))
			return
		}
		dur := v.Addr().Interface().(*Duration)
		_ = dur.UnmarshalText([]byte(n.Value))
		return
	}
	if v.Type() == workspaceType && n.Kind == yaml.ScalarNode {
		v.Field(0).SetString(n.Value) // a plain path: the form without options
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		d.value(n, e.Elem(), path, depth)
		v.Set(e)
	case reflect.Struct:
		d.structure(n, v, path, depth)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "want a mapping (key: value, ...), found "+describe(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		d.pairs(n, path, depth, func(k, val *yaml.Node, key string) {
			e := reflect.New(v.Type().Elem()).Elem()
			d.value(val, e, append(path, key), depth+1)
			m.SetMapIndex(reflect.ValueOf(key), e)
		})
		v.Set(m)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list ([a, b] or lines starting with '- '), found "+describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.value(item, s.Index(i), append(path, "["+strconv.Itoa(i)+"]"), depth+1)
		}
		v.Set(s)
	case reflect.Interface:
		if x := d.plain(n, path, depth); x != nil {
			v.Set(reflect.ValueOf(x))
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a string, found "+describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64:
		i, ok := scalarInt(n)
		if !ok || v.OverflowInt(i) {
			d.fail(n, path, "want an integer, found "+describe(n))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, ok := scalarFloat(n)
		switch {
		case !ok && n.Kind == yaml.ScalarNode && n.Style == 0 && overflows(n.Value):
			// A number too large for a float, which YAML takes for a string.
			d.fail(n, path, fmt.Sprintf("%s is not a finite number", n.Value))
		case !ok:
			d.fail(n, path, "want a number, found "+describe(n))
		case math.IsNaN(f) || math.IsInf(f, 0):
			d.fail(n, path, fmt.Sprintf("%s is not a finite number", n.Value))
		default:
			v.SetFloat(f)
		}
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.fail(n, path, "want true or false, found "+describe(n))
			return
		}
		v.SetBool(b)
	default:
		panic("task: no decoding for " + v.Type().String())
	}
}

// deref follows aliases, and counts the nodes decoded against the limits.
func (d *decoder) deref(n *yaml.Node, path []string, depth int) *yaml.Node {
	if d.stopped {
		return nil
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if d.nodes++; d.nodes > d.maxNodes || depth > maxNesting {
		d.fail(n, path, "the file nests too deeply, or its aliases expand too far")
		d.stopped = true
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// pairs calls f for each key and value of mapping n, merges (<<) first, and reports keys
// that are not strings or are written twice.
func (d *decoder) pairs(n *yaml.Node, path []string, depth int, f func(k, v *yaml.Node, key string)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			src := d.deref(n.Content[i+1], path, depth+1)
			if src == nil {
				continue
			}
			srcs := []*yaml.Node{src}
			if src.Kind == yaml.SequenceNode {
				srcs = src.Content
			}
			for _, s := range srcs {
				if s = d.deref(s, path, depth+1); s == nil {
					continue
				}
				if s.Kind != yaml.MappingNode {
					d.note(s, path, "a merge (<<) takes a mapping or a list of mappings, found "+describe(s))
					continue
				}
				d.pairs(s, path, depth+1, f)
			}
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		if k = d.deref(k, path, depth+1); k == nil {
			return
		}
		if k.Kind != yaml.ScalarNode {
			d.note(k, path, "want a key (a string), found "+describe(k))
			continue
		}
		if seen[k.Value] {
			d.note(k, path, fmt.Sprintf("key %q is written twice", k.Value))
			continue
		}
		seen[k.Value] = true
		f(k, val, k.Value)
	}
}

// structure decodes a mapping into a struct by the fields' yaml names; a key that names no
// field is an error.
func (d *decoder) structure(n *yaml.Node, v reflect.Value, path []string, depth int) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping (key: value, ...), found "+describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	d.pairs(n, path, depth, func(k, val *yaml.Node, key string) {
		i, ok := fields[key]
		if !ok {
			d.note(k, path, fmt.Sprintf("unknown field %q", key))
			return
		}
		v.Field(i).SetZero() // a key replaces what a merge (<<) gave it, as a whole
		d.value(val, v.Field(i), append(path, key), depth+1)
	})
}

var fieldCache sync.Map // reflect.Type → map[string]int

func fieldsOf(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			m[name] = i
		}
	}
	fieldCache.Store(t, m)
	return m
}

// plain decodes a free-form value (a tool's arguments, a schema): mappings become
// map[string]any, lists []any, scalars string, int64 (uint64 or float64 when larger), float64,
// bool or nil.
func (d *decoder) plain(n *yaml.Node, path []string, depth int) any {
	if n = d.deref(n, path, depth); n == nil {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		d.pairs(n, path, depth, func(_, val *yaml.Node, key string) {
			m[key] = d.plain(val, append(path, key), depth+1)
		})
		return m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, item := range n.Content {
			s[i] = d.plain(item, append(path, "["+strconv.Itoa(i)+"]"), depth+1)
		}
		return s
	}
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int":
		if i, ok := scalarInt(n); ok {
			return i
		}
		var u uint64
		if n.Decode(&u) == nil {
			return u
		}
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(f, 0) {
			return f
		}
	case "!!float":
		f, ok := scalarFloat(n)
		if ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			d.fail(n, path, fmt.Sprintf("%s is not a finite number (a task is stored as JSON, which has none)", n.Value))
			return nil
		}
		if ok {
			return f
		}
	}
	return n.Value
}

func scalarInt(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, false
	}
	if i, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
		return i, true
	}
	var i int64
	return i, n.Decode(&i) == nil
}

func scalarFloat(n *yaml.Node) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
		return 0, false
	}
	if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
		return f, true
	}
	var f float64
	return f, n.Decode(&f) == nil
}

// describe names what a node is, for type errors: `a string "four"`, `a list`.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len([]rune(v)) > 40 {
		v = string([]rune(v)[:40]) + "..."
	}
	switch n.ShortTag() {
	case "!!int":
		return "the integer " + v
	case "!!float":
		return "the number " + v
	case "!!bool":
		return "the boolean " + v
	case "!!str":
		return fmt.Sprintf("the string %q", v)
	}
	return fmt.Sprintf("%q", v)
}

// locate finds the line of a field path in the document (the field itself, else the nearest
// parent written there); 0 when none is.
func locate(root *yaml.Node, path []string) int {
	line, n := 0, root
	for _, p := range path {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n == nil {
			break
		}
		var next *yaml.Node
		at := 0
		if i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "["), "]")); err == nil && strings.HasPrefix(p, "[") {
			if n.Kind == yaml.SequenceNode && i >= 0 && i < len(n.Content) {
				next, at = n.Content[i], n.Content[i].Line
			}
		} else if n.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if k := n.Content[j]; k.Kind == yaml.ScalarNode && k.Value == p && k.ShortTag() != "!!merge" {
					next, at = n.Content[j+1], k.Line
					break
				}
			}
		}
		if next == nil {
			break
		}
		line, n = at, next
	}
	return line
}
