package task

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

var (
	bom       = []byte("\xef\xbb\xbf")
	bomUTF16L = []byte("\xff\xfe")
	bomUTF16B = []byte("\xfe\xff")
	bomUTF32L = []byte("\xff\xfe\x00\x00")
	bomUTF32B = []byte("\x00\x00\xfe\xff")
)

// HasByteOrderMark reports whether data starts with a byte-order mark (UTF-8, UTF-16 or
// UTF-32), which DecodeText reads.
func HasByteOrderMark(data []byte) bool {
	for _, m := range [][]byte{bom, bomUTF16L, bomUTF16B, bomUTF32B} { // UTF-32 LE starts as UTF-16 LE does
		if bytes.HasPrefix(data, m) {
			return true
		}
	}
	return false
}

// DecodeText returns the text of a task file, a plan change or a prompt (what: "task file",
// "plan change", "prompt"), named name in errors, as UTF-8 without a byte-order mark, however it
// comes: `run`, `loop`, `submit`, `replan` and the daemon's API read the same file the same way.
//
//   - A UTF-8 byte-order mark is dropped.
//   - A file that starts with a UTF-16 byte-order mark (little- or big-endian: what Windows
//     PowerShell's `>` and Notepad's "Unicode" write) is decoded: the mark says the encoding,
//     and YAML readers must read UTF-16. One that is not valid UTF-16 (an odd number of bytes,
//     a lone surrogate) is refused, saying where.
//   - UTF-32 (with its mark), and text with NUL bytes (UTF-16 or UTF-32 without a mark, or such
//     a file read as if it were UTF-8 before it was sent) are refused, naming the encoding: no
//     YAML or JSON text holds a NUL, and without a mark the encoding is a guess.
//   - Text that is not valid UTF-8 (Latin-1, Windows-1252) is refused, naming the line and the
//     byte offset of the first byte that is not: the YAML library's own error names neither.
func DecodeText(name, what string, data []byte) ([]byte, error) {
	refuse := func(format string, args ...any) error {
		return &Error{File: name, Msg: fmt.Sprintf("the %s ", what) + fmt.Sprintf(format, args...)}
	}
	switch {
	case bytes.HasPrefix(data, bomUTF32L), bytes.HasPrefix(data, bomUTF32B):
		return nil, refuse("is UTF-32 (it starts with a UTF-32 byte-order mark): save it as UTF-8 (or UTF-16)")
	case bytes.HasPrefix(data, bomUTF16L):
		return decodeUTF16(data[2:], false, refuse)
	case bytes.HasPrefix(data, bomUTF16B):
		return decodeUTF16(data[2:], true, refuse)
	}
	marked := bytes.HasPrefix(data, bom)
	data = bytes.TrimPrefix(data, bom)
	if i := bytes.IndexByte(data, 0); i >= 0 {
		line, _ := position(data, i)
		return nil, refuse("holds NUL bytes (the first on line %d): it looks like UTF-16 or UTF-32 without a byte-order mark, "+
			"or such a file read as UTF-8; save it as UTF-8 (or UTF-16 with a byte-order mark)", line)
	}
	if i := InvalidUTF8(data); i >= 0 {
		line, _ := position(data, i)
		off := i
		if marked {
			off += len(bom) // the offset in the file as it is on disk
		}
		return nil, refuse("is not UTF-8: the byte 0x%02X on line %d (byte offset %d) is not valid UTF-8, as in a Latin-1 or "+
			"Windows-1252 file; save it as UTF-8 (or UTF-16 with a byte-order mark)", data[i], line, off)
	}
	return data, nil
}

// lineFeeds returns data with each carriage return that no line feed follows (an old Mac's
// line break) made a line feed. YAML reads either as a line break and normalizes it to a line
// feed in a value, and JSON allows either only as white space; but the messages' line
// numbers, the parsers' and ours, count line feeds. data itself is not changed.
func lineFeeds(data []byte) []byte {
	i := bytes.IndexByte(data, '\r')
	if i < 0 {
		return data
	}
	out := bytes.Clone(data)
	for ; i < len(out); i++ {
		if out[i] == '\r' && (i+1 == len(out) || out[i+1] != '\n') {
			out[i] = '\n'
		}
	}
	return out
}

// InvalidUTF8 returns the offset of the first byte of b that is not part of valid UTF-8, or -1.
func InvalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// decodeUTF16 decodes UTF-16 text (after its byte-order mark) to UTF-8.
func decodeUTF16(b []byte, bigEndian bool, refuse func(string, ...any) error) ([]byte, error) {
	enc := "UTF-16LE"
	if bigEndian {
		enc = "UTF-16BE"
	}
	if len(b)%2 != 0 {
		return nil, refuse("starts with a %s byte-order mark but is not %s: it has an odd number of bytes (%d after the mark)", enc, enc, len(b))
	}
	out := make([]byte, 0, len(b)/2+len(b)/4)
	line := 1
	for i := 0; i < len(b); i += 2 {
		u := rune(b[i]) | rune(b[i+1])<<8
		if bigEndian {
			u = rune(b[i])<<8 | rune(b[i+1])
		}
		r := u
		if utf16.IsSurrogate(u) {
			var u2 rune = -1
			if i+3 < len(b) {
				u2 = rune(b[i+2]) | rune(b[i+3])<<8
				if bigEndian {
					u2 = rune(b[i+2])<<8 | rune(b[i+3])
				}
			}
			if r = utf16.DecodeRune(u, u2); r == utf8.RuneError {
				return nil, refuse("starts with a %s byte-order mark but is not %s: a lone surrogate (0x%04X) on line %d", enc, enc, u, line)
			}
			i += 2
		}
		if r == 0 {
			return nil, refuse("is %s and holds a NUL character on line %d: no task file holds one", enc, line)
		}
		if r == '\n' {
			line++
		}
		out = utf8.AppendRune(out, r)
	}
	// A UTF-8 mark inside (U+FEFF after the UTF-16 one) is dropped as it would be at the start.
	return bytes.TrimPrefix(out, bom), nil
}

// jsonSurrogates rewrites, in a document that is JSON, each escaped UTF-16 surrogate pair
// ("\ud83d\ude80": how JSON writers that escape everything outside ASCII, such as Python's
// json.dumps, write a character outside the Basic Multilingual Plane) as the character's own
// UTF-8 bytes. The YAML parser, which reads JSON documents too, takes a \u escape for a code
// point and refuses the halves of a pair. A lone half, which stands for no character, is
// refused with its line and column. It also escapes each character a JSON string may hold as
// it is but YAML refuses or folds unescaped (DEL, the C1 controls, U+2028, U+2029, U+FFFE,
// U+FFFF: json.Marshal writes a prompt's U+0080 as it is), so that a task stored as JSON reads
// back the same. Lines do not
// move (no newline is added or removed), so later errors name the lines of the file as written.
// Anything that is not valid JSON is returned as it is, for the YAML parser to read or refuse.
func jsonSurrogates(name string, data []byte) ([]byte, error) {
	if !hasSurrogateEscape(data) && !hasYAMLUnprintable(data) || !json.Valid(data) {
		return data, nil
	}
	out := make([]byte, 0, len(data))
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && data[i+1] != 'u': // valid JSON: an escape is whole
			out = append(out, c, data[i+1])
			i++
			continue
		case c >= 0x7F: // in a string, as it is
			if r, size := utf8.DecodeRune(data[i:]); !yamlPrintable(r) {
				out = fmt.Appendf(out, `\u%04x`, r)
				i += size - 1
				continue
			}
		case c == '\\': // \uXXXX
			u := hex4(data[i+2 : i+6])
			if !utf16.IsSurrogate(u) {
				break
			}
			r := utf8.RuneError
			if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
				r = utf16.DecodeRune(u, hex4(data[i+8:i+12]))
			}
			if r == utf8.RuneError {
				line, col := position(data, i)
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("column %d: %s is half of a UTF-16 surrogate pair, without its other half, "+
					"so it stands for no character (a character outside the Basic Multilingual Plane is escaped as both halves, high then low: \\ud83d\\ude80)",
					col, data[i:i+6])}
			}
			out = utf8.AppendRune(out, r)
			i += 11
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// LoneSurrogate is the offset of the first \uXXXX escape in the JSON text data that is half of
// a UTF-16 surrogate pair without its other half, or -1. Such an escape stands for no character:
// encoding/json reads it as U+FFFD, so a request that held one would be taken with its text
// changed. data is JSON text (in which a backslash starts an escape); anything else gets an
// answer too, without a panic.
func LoneSurrogate(data []byte) int {
	if !hasSurrogateEscape(data) {
		return -1
	}
	for i := 0; i < len(data)-1; i++ {
		switch {
		case data[i] != '\\':
			continue
		case data[i+1] != 'u':
			i++ // the escaped character, a backslash among them, starts no escape
			continue
		case i+6 > len(data):
			return -1
		}
		u := hex4(data[i+2 : i+6])
		if !utf16.IsSurrogate(u) {
			i += 5
			continue
		}
		if i+12 > len(data) || data[i+6] != '\\' || data[i+7] != 'u' || utf16.DecodeRune(u, hex4(data[i+8:i+12])) == utf8.RuneError {
			return i
		}
		i += 11
	}
	return -1
}

// position is the line and column of data[at], counted from 1; the column in characters, as
// editors count them.
func position(data []byte, at int) (line, col int) {
	start := bytes.LastIndexByte(data[:at], '\n') + 1
	return 1 + bytes.Count(data[:start], []byte("\n")), utf8.RuneCount(data[start:at]) + 1
}

// notJSON says, of a task file meant as JSON (named .json, or a mapping or list whose first key
// or item is a JSON string: a YAML flow mapping, {id: x}, is not) that is not valid JSON, where
// (line and column) and why encoding/json refuses it.
func notJSON(name string, data []byte) (line, col int, why string, ok bool) {
	t := bytes.TrimLeft(data, " \t\r\n")
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return 0, 0, "", false
	}
	if next := bytes.TrimLeft(t[1:], " \t\r\n"); !strings.EqualFold(filepath.Ext(name), ".json") &&
		(len(next) == 0 || strings.IndexByte(`"{}[]`, next[0]) < 0) {
		return 0, 0, "", false
	}
	var v any
	var se *json.SyntaxError
	if err := json.Unmarshal(data, &v); !errors.As(err, &se) {
		return 0, 0, "", false
	}
	line, col = position(data, min(max(int(se.Offset)-1, 0), len(data)))
	return line, col, se.Error(), true
}

// hasSurrogateEscape says whether data holds "\u" followed by D8-DF, in either case.
func hasSurrogateEscape(data []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j + 2
		if i+1 < len(data) && (data[i] == 'd' || data[i] == 'D') && strings.IndexByte("89abcdefABCDEF", data[i+1]) >= 0 {
			return true
		}
	}
}

// yamlPrintable says whether the YAML parser reads r as it is inside a JSON string (a character
// at 0x7F or above, where JSON and YAML differ): not DEL, not a C1 control, not U+FFFE or U+FFFF,
// which it refuses; not NEL, U+2028 or U+2029, which it takes for line breaks and folds.
func yamlPrintable(r rune) bool {
	return r != 0x7F && (r < 0x80 || r > 0x9F) && r != 0x2028 && r != 0x2029 && r != 0xFFFE && r != 0xFFFF
}

// hasYAMLUnprintable says whether data holds a character at 0x7F or above that YAML does not
// read as it is (yamlPrintable).
func hasYAMLUnprintable(data []byte) bool {
	for i := 0; i < len(data); {
		if data[i] < 0x7F {
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if !yamlPrintable(r) {
			return true
		}
		i += size
	}
	return false
}

// hex4 is the value of four hex digits (checked by json.Valid).
func hex4(b []byte) rune {
	var v [2]byte
	_, _ = hex.Decode(v[:], b)
	return rune(v[0])<<8 | rune(v[1])
}
