package task

import (
	"encoding/json"
	"strings"

	"go.yaml.in/yaml/v3"
)

// jsonDocument builds the node tree of a document that is one JSON object: the tree the YAML
// parser makes of it (JSON is YAML too), node for node, with the same kinds, tags, values and
// lines, in a fraction of the time. A stored task is JSON, and so is what the daemon's API is
// sent. It reports false for anything else, JSON or not (an array, a syntax error, a second
// value after the first, nesting deeper than maxNesting), which the YAML parser reads or
// refuses as before, with its messages. encoding/json checks the syntax first, so the reader
// below walks text known to be valid.
func jsonDocument(data []byte) (*yaml.Node, bool) {
	r := jsonReader{data: data, line: 1}
	r.space()
	if r.pos == len(data) || data[r.pos] != '{' || !json.Valid(data) {
		return nil, false
	}
	root, ok := r.value(0)
	return root, ok
}

// jsonReader walks valid JSON, counting lines: pos is the next byte, on line line, which
// starts at lineStart.
type jsonReader struct {
	data                 []byte
	pos, line, lineStart int
}

// space skips white space (the only place a line break can be in valid JSON). A line ends, as
// the YAML parser counts them, at "\n", "\r\n" or a "\r" alone (an old Mac's line break).
func (r *jsonReader) space() {
	for ; r.pos < len(r.data); r.pos++ {
		switch r.data[r.pos] {
		case '\r':
			if r.pos+1 < len(r.data) && r.data[r.pos+1] == '\n' {
				continue // the "\n" ends the line
			}
			r.line, r.lineStart = r.line+1, r.pos+1
		case '\n':
			r.line, r.lineStart = r.line+1, r.pos+1
		case ' ', '\t':
		default:
			return
		}
	}
}

// node starts a node at pos, with its line and column (1-based; the column in bytes).
func (r *jsonReader) node(kind yaml.Kind, style yaml.Style, tag string) *yaml.Node {
	return &yaml.Node{Kind: kind, Style: style, Tag: tag, Line: r.line, Column: r.pos - r.lineStart + 1}
}

// value reads the value at pos (after white space) and the white space after it, and returns
// its node as the YAML parser makes it of the same text in flow style: objects are flow
// mappings, arrays flow sequences, strings double-quoted scalars, and numbers, true, false and
// null plain scalars, tagged as YAML resolves them. Deeper than maxNesting it gives up.
func (r *jsonReader) value(depth int) (*yaml.Node, bool) {
	if depth > maxNesting {
		return nil, false
	}
	var n *yaml.Node
	switch c := r.data[r.pos]; c {
	case '{', '[':
		n = r.node(yaml.MappingNode, yaml.FlowStyle, "!!map")
		end := byte('}')
		if c == '[' {
			n.Kind, n.Tag, end = yaml.SequenceNode, "!!seq", ']'
		}
		r.pos++
		r.space()
		for r.data[r.pos] != end {
			if c == '{' {
				key, ok := r.value(depth + 1) // a string
				if !ok {
					return nil, false
				}
				r.pos++ // the colon
				r.space()
				n.Content = append(n.Content, key)
			}
			v, ok := r.value(depth + 1)
			if !ok {
				return nil, false
			}
			n.Content = append(n.Content, v)
			if r.data[r.pos] == ',' {
				r.pos++
				r.space()
			}
		}
		r.pos++
	case '"':
		n = r.node(yaml.ScalarNode, yaml.DoubleQuotedStyle, "!!str")
		start, escaped := r.pos, false
		for r.pos++; r.data[r.pos] != '"'; r.pos++ {
			if r.data[r.pos] == '\\' {
				escaped = true
				r.pos++
			}
		}
		r.pos++
		if !escaped {
			n.Value = string(r.data[start+1 : r.pos-1])
		} else if json.Unmarshal(r.data[start:r.pos], &n.Value) != nil {
			return nil, false
		}
	default: // a number, true, false or null
		n = r.node(yaml.ScalarNode, 0, "")
		start := r.pos
		for r.pos < len(r.data) && strings.IndexByte("-+.eE0123456789truefalsn", r.data[r.pos]) >= 0 {
			r.pos++
		}
		n.Value = string(r.data[start:r.pos])
		n.Tag = n.ShortTag() // !!int, !!float, !!bool or !!null, as the YAML parser resolves it
	}
	r.space()
	return n, true
}
