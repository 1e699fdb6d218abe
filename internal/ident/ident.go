// Package ident checks the names harness-edge gives things (harness and step IDs, checkpoint
// names, device names): a letter or digit, then letters, digits and a few punctuation marks, up
// to a length. A loop, not a regular expression: a pattern such as [A-Za-z0-9._-]{0,127}
// compiles to a program of a hundred and more states, which every command paid for at start-up.
package ident

// Valid reports whether s is 1 to maxLen bytes, starts with an ASCII letter or digit, and
// continues with ASCII letters, digits and the bytes of punct.
func Valid(s string, maxLen int, punct string) bool {
	if len(s) == 0 || len(s) > maxLen || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && !in(c, punct) {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func in(c byte, set string) bool {
	for i := 0; i < len(set); i++ {
		if set[i] == c {
			return true
		}
	}
	return false
}
