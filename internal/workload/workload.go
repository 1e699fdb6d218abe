// Package workload generates the byte strings that tests, fuzzers, benchmarks and
// `harness-edge doctor` feed the engine: text shaped like agent state, random bytes, and
// scattered edits. Everything is deterministic for a given *rand.Rand.
package workload

import (
	"bytes"
	"fmt"
	"math/rand/v2"
)

var words = []string{
	"the", "tool", "result", "file", `"path":`, "{", "}", "ok", "line", "error", "agent", "\n",
	"func", "return", "if", "err", "!=", "nil", "test", "passed", "build", "step", "plan",
}

// Text returns n bytes of text-like data: words, punctuation and numbers, as agent state is.
func Text(r *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
		b = append(b, ' ')
		if r.IntN(8) == 0 {
			b = fmt.Appendf(b, "%d ", r.Uint32())
		}
	}
	return b[:n]
}

// Random returns n uniformly random bytes.
func Random(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// ScatteredEdits returns a copy of base with the given number of small edits (1-byte
// substitutions, 1-20 byte insertions, 1-5 byte deletions) at random places.
func ScatteredEdits(r *rand.Rand, base []byte, edits int) []byte {
	t := bytes.Clone(base)
	for range edits {
		if len(t) < 32 {
			t = append(t, Text(r, 8)...)
			continue
		}
		at := r.IntN(len(t) - 8)
		switch r.IntN(3) {
		case 0:
			t[at] ^= 0x5a
		case 1:
			t = append(t[:at], append(Text(r, 1+r.IntN(20)), t[at:]...)...)
		default:
			t = append(t[:at], t[at+1+r.IntN(5):]...)
		}
	}
	return t
}
