package ident

import (
	"regexp"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
)

// Valid accepts exactly what the regular expressions it replaced accept, on strings drawn
// from the characters that matter (the allowed ones, their neighbours, multi-byte ones) at
// lengths around each limit.
func TestPropertyValidAcceptsWhatThePatternDoes(t *testing.T) {
	for _, c := range []struct {
		max   int
		punct string
		re    string
	}{
		{128, "._-", `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`},
		{64, "._-", `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`},
		{64, "_-", `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`},
	} {
		re := regexp.MustCompile(c.re)
		p := gopter.DefaultTestParametersWithSeed(20261123)
		p.MinSuccessfulTests = 500
		ps := gopter.NewProperties(p)
		alphabet := []string{"a", "Z", "0", "9", ".", "_", "-", "/", " ", "é", "@", "`", "{", "[", ":", "\x00", "\n"}
		word := gen.SliceOf(gen.IntRange(0, len(alphabet)-1)).Map(func(ix []int) string {
			var b strings.Builder
			for _, i := range ix {
				b.WriteString(alphabet[i])
			}
			return b.String()
		})
		long := gen.IntRange(c.max-2, c.max+2).Map(func(n int) string { return strings.Repeat("a", n) })
		ps.Property(c.re, prop.ForAll(func(s string) bool {
			return Valid(s, c.max, c.punct) == re.MatchString(s)
		}, gen.OneGenOf(word, long)))
		ps.TestingRun(t)
	}
}
