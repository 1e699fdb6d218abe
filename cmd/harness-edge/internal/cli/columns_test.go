package cli

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
)

// On ASCII text the columns writer lays out exactly as text/tabwriter with a padding of two
// spaces does, left or right aligned: the same column blocks across lines with fewer cells,
// empty cells, text after the last newline.
func TestColumnsLayOutASCIIAsTabwriterDoes(t *testing.T) {
	p := gopter.DefaultTestParametersWithSeed(20261124)
	p.MinSuccessfulTests = 300
	props := gopter.NewProperties(p)
	// Text made of short words, tabs and newlines, in random mixes.
	text := gen.SliceOf(gen.OneGenOf(
		gen.Const("\t"), gen.Const("\n"), gen.Const("\n\n"),
		gen.AlphaString().Map(func(s string) string { return s[:min(len(s), 9)] }),
		gen.Const(" a b "), gen.Const("STEP"),
	)).Map(func(parts []string) string { return strings.Join(parts, "") })
	props.Property("same bytes as tabwriter", prop.ForAll(func(s string, right bool) bool {
		var want, got bytes.Buffer
		flags := uint(0)
		if right {
			flags = tabwriter.AlignRight
		}
		tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', flags)
		tw.Write([]byte(s))
		tw.Flush()
		c := newColumns(&got)
		c.right = right
		c.Write([]byte(s))
		if err := c.Flush(); err != nil {
			return false
		}
		if got.String() != want.String() {
			t.Logf("input %q\nwant %q\ngot  %q", s, want.String(), got.String())
			return false
		}
		return true
	}, text, gen.Bool()))
	props.TestingRun(t)
}

// A table with Chinese, Japanese, emoji (with a skin tone, a family joined by zero-width
// joiners, a flag) and combining accents puts each column at the same terminal column on every
// line.
func TestColumnsAlignWideAndCombiningCharacters(t *testing.T) {
	rows := [][]string{
		{"STEP", "AGENT", "DESCRIPTION"},
		{"s1", "A", "plain"},
		{"读取文件", "🚀", "wide"},
		{"ステップ", "👍🏽", "skin tone"},
		{"s3", "👨\u200d👩\u200d👧", "family"},
		{"s4", "🇯🇵", "flag"},
		{"cafe\u0301", "e\u0301", "combining"},
		{"s5", "❤\ufe0f", "variation selector"},
	}
	var b bytes.Buffer
	c := newColumns(&b)
	for _, r := range rows {
		c.Write([]byte(strings.Join(r, "\t") + "\n"))
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(rows) {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	for i, l := range lines {
		// The third column starts where the header's does, counted in terminal columns.
		at := strings.Index(l, rows[i][2])
		if got, want := displayWidth(l[:at]), strings.Index(lines[0], "DESCRIPTION"); got != want {
			t.Errorf("line %d %q: third column at terminal column %d, want %d\n%s", i, l, got, want, b.String())
		}
	}
	for s, want := range map[string]int{
		"abc": 3, "读取": 4, "🚀": 2, "👍🏽": 2, "👨\u200d👩\u200d👧": 2, "🇯🇵": 2, "e\u0301": 1, "❤\ufe0f": 2,
		"\x1b[2J": 4 + 3, "\u202e": 6, "\xff": 4, "": 0,
	} {
		if got := displayWidth(s); got != want {
			t.Errorf("displayWidth(%q) = %d, want %d", s, got, want)
		}
	}
}
