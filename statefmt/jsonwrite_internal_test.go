package statefmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/internal/proptest"
)

// jsonPieces are what a string is made of in the property below: plain ASCII, and every kind of
// byte the writer treats apart (controls, the quote, the backslash, DEL, multi-byte UTF-8,
// U+2028 and U+2029, invalid bytes, a truncated sequence), so that each lands at every offset
// of an 8-byte word.
var jsonPieces = []string{"a", "Zq", "0123456", " ", "~", "\n", "\t", "\r", "\x00", "\x1f", "\x7f", `"`, `\`, "/", "<&>",
	"é", "€", "😀", "\u2028", "\u2029", "\xff", "\xe2\x82", "\xc3"}

var genJSONText gopter.Gen = func(p *gopter.GenParameters) *gopter.GenResult {
	var b strings.Builder
	for range p.Rng.Intn(40) {
		b.WriteString(jsonPieces[p.Rng.Intn(len(jsonPieces))])
	}
	return gopter.NewGenResult(b.String(), gopter.NoShrinker)
}

// A string is written as encoding/json writes it (HTML characters left as they are), whatever
// bytes it holds and wherever they fall.
func TestPropertyStringsAreWrittenAsEncodingJSONWritesThem(t *testing.T) {
	ps := proptest.Props(t, 500)
	ps.Property("str writes encoding/json's bytes", prop.ForAll(func(s string) bool {
		return proptest.Report(t, func() string {
			var w jsonWriter
			w.str(s)
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(s); err != nil {
				return err.Error()
			}
			if got := string(w.b); got != strings.TrimSuffix(want.String(), "\n") {
				return fmt.Sprintf("%q\nwritten  %s\nexpected %s", s, got, want.String())
			}
			return ""
		})
	}, genJSONText))
	ps.TestingRun(t)
}

// The word test lets through exactly the bytes the byte loop would write as they are.
func TestPlainASCII8AgreesWithTheByteTest(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	word := []byte("abcdefgh")
	for c := range 256 {
		for pos := range 8 {
			for _, fill := range []byte{'a', 0x20, 0x7e, 0x21, 0x5b} {
				for i := range word {
					word[i] = fill
				}
				word[pos] = byte(c)
				want := plain(byte(c)) && plain(fill)
				if got := plainASCII8(string(word)); got != want {
					t.Fatalf("%q: plainASCII8 %v, want %v", word, got, want)
				}
			}
		}
	}
}
