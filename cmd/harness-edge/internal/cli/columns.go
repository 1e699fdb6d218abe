package cli

import (
	"bytes"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// columns lines up tab-separated cells as text/tabwriter does with a padding of two spaces (the
// same column blocks, the same output for ASCII), but measures a cell by the columns a terminal
// gives it: a Chinese character or an emoji takes two, a combining mark none. tabwriter counts
// characters, so a plan whose steps are described in Japanese, or an agent named with an
// emoji, came out with its columns askew.
type columns struct {
	w     io.Writer
	right bool // align cells to the right (tabwriter.AlignRight)
	buf   bytes.Buffer
}

func newColumns(w io.Writer) *columns { return &columns{w: w} }

func (c *columns) Write(p []byte) (int, error) { return c.buf.Write(p) }

// cell is one cell of a line: its text and its width on a terminal.
type cell struct {
	text  string
	width int
}

// Flush writes what was written since the last Flush, lined up.
func (c *columns) Flush() error {
	text := c.buf.String()
	c.buf.Reset()
	if text == "" {
		return nil
	}
	raw := strings.Split(text, "\n")
	lines := make([][]cell, len(raw))
	for i, l := range raw {
		for _, t := range strings.Split(l, "\t") {
			lines[i] = append(lines[i], cell{t, displayWidth(t)})
		}
	}
	// Text after the last newline ends in a cell only if it is not empty, as in tabwriter.
	if last := lines[len(lines)-1]; last[len(last)-1].text == "" {
		lines[len(lines)-1] = last[:len(last)-1]
	}
	f := formatter{lines: lines, right: c.right}
	f.format(0, len(lines))
	_, err := c.w.Write(f.out)
	return err
}

// formatter is tabwriter's layout: a column block is a run of consecutive lines that have a
// tab-terminated cell in that column; each block is as wide as its widest cell plus the
// padding, and the lines in it are laid out again, recursively, for the columns to its right.
type formatter struct {
	lines  [][]cell // the last line is what followed the last newline ("" when text ended with one)
	widths []int    // the widths of the columns of the blocks being laid out
	right  bool
	out    []byte
}

const columnPadding = 2

func (f *formatter) format(line0, line1 int) {
	column := len(f.widths)
	for this := line0; this < line1; this++ {
		if column >= len(f.lines[this])-1 {
			continue
		}
		// This line has a cell in the column: a block starts here.
		f.writeLines(line0, this)
		line0 = this
		w := 0
		for ; this < line1 && column < len(f.lines[this])-1; this++ {
			w = max(w, f.lines[this][column].width+columnPadding)
		}
		f.widths = append(f.widths, w)
		f.format(line0, this)
		f.widths = f.widths[:len(f.widths)-1]
		line0 = this
	}
	f.writeLines(line0, line1)
}

func (f *formatter) writeLines(line0, line1 int) {
	for i := line0; i < line1; i++ {
		for j, c := range f.lines[i] {
			pad := 0
			if j < len(f.widths) {
				pad = f.widths[j] - c.width
			}
			if f.right {
				f.out = append(f.out, strings.Repeat(" ", pad)...)
				f.out = append(f.out, c.text...)
			} else {
				f.out = append(f.out, c.text...)
				f.out = append(f.out, strings.Repeat(" ", pad)...)
			}
		}
		if i+1 < len(f.lines) {
			f.out = append(f.out, '\n')
		}
	}
}

// displayWidth is how many columns a terminal gives s as the CLI prints it (through
// termWriter, which shows control characters and bidi controls escaped): two for East Asian
// wide and full-width characters (CJK, most emoji), none for combining marks, joiners and
// variation selectors, and a character joined to the one before by a zero-width joiner (an
// emoji sequence such as a family) or an emoji modifier (a skin tone) adds nothing. Terminals
// differ at the edges; this is what the common ones do.
func displayWidth(s string) int {
	n, prev, joined := 0, 0, false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		var w int
		switch {
		case r == utf8.RuneError && size == 1, r < 0x20, r == 0x7f:
			w = 4 // \x1b
		case r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			w = 6 // \u202e
		case r == '\u200d':
			joined, prev = true, 0
			continue
		case joined:
			joined = false
		case r == '\ufe0f' && prev == 1:
			w = 1 // emoji presentation of a character that is narrow as text
		case r >= 0x1f3fb && r <= 0x1f3ff && prev == 2:
		case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		default:
			w = 1
			if k := width.LookupRune(r).Kind(); k == width.EastAsianWide || k == width.EastAsianFullwidth {
				w = 2
			}
		}
		n, prev = n+w, w
	}
	return n
}
