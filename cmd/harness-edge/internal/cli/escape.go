package cli

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// termWriter is what the CLI prints for people through: it shows control characters (the
// escape sequences that set a terminal's title, clear it, or write the clipboard through
// OSC 52) as visible \x1b-style text instead of passing them on, keeping newlines and tabs,
// and the Unicode bidi controls that reorder what a line shows (U+202E makes "exe.txt" of
// "\u202etxt.exe") as \u202e. Right-to-left text itself needs none of them.
// Tool output, workspace files and imported states reach the screen through show, events, run
// progress and logs, and none of them may drive the terminal. JSON output and export's binary
// bypass it (raw): they must stay exact, and encoding/json escapes the C0 characters anyway.
type termWriter struct {
	w       io.Writer
	raw     bool
	pending []byte // an incomplete UTF-8 sequence from the previous Write
}

func (t *termWriter) Write(p []byte) (int, error) {
	if t.raw {
		return t.w.Write(p)
	}
	n := len(p)
	buf := append(t.pending, p...)
	t.pending = nil
	out := make([]byte, 0, len(buf)+16)
	for i := 0; i < len(buf); {
		c := buf[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				out = fmt.Appendf(out, `\x%02x`, c)
			} else {
				out = append(out, c)
			}
			i++
			continue
		}
		if !utf8.FullRune(buf[i:]) {
			t.pending = append([]byte(nil), buf[i:]...)
			break
		}
		r, size := utf8.DecodeRune(buf[i:])
		switch {
		case r >= 0x80 && r <= 0x9f, // C1 controls (CSI, OSC, ...)
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi embeddings, overrides, isolates
			out = fmt.Appendf(out, `\u%04x`, r)
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, c)
		default:
			out = append(out, buf[i:i+size]...)
		}
		i += size
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return n, nil
}

// Flush writes out an incomplete UTF-8 sequence left at the end, escaped.
func (t *termWriter) Flush() {
	for _, c := range t.pending {
		fmt.Fprintf(t.w, `\x%02x`, c)
	}
	t.pending = nil
}
