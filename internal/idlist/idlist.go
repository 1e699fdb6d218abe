// Package idlist bounds the lists of ids (steps, gates, harnesses) that messages name: a
// status reason, an event's message, an error or a command's output names the first Max of
// them and then says how many more there are, so that a message stays a line long however
// many steps a plan has. The full lists stay where they are data (the plan's steps, an event's
// fields, a JSON result). It imports nothing of harness-edge: every layer uses it.
package idlist

import (
	"strconv"
	"strings"
)

// Max is how many items a message names before it counts the rest: a failed first step of a
// 1,000-step chain blocks 999 steps, and a message naming them all would be 10 KB long.
const Max = 10

// Join joins items with sep, naming the first Max of them and then how many more there are:
// "s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 29,990 more".
func Join(items []string, sep string) string {
	return join(items, sep, "more")
}

// JoinMore is Join with what the rest are (noun, in the singular), for items that are phrases
// rather than ids: JoinMore(inserts, "; ", "insert") ends "... and 29,990 more inserts" ("and 1
// more insert").
func JoinMore(items []string, sep, noun string) string {
	more := "more " + noun
	if len(items)-Max > 1 {
		more += "s"
	}
	return join(items, sep, more)
}

func join(items []string, sep, more string) string {
	if len(items) <= Max {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:Max], sep) + " and " + Count(len(items)-Max) + " " + more
}

// Of is n things: "1 iteration", "3 iterations", "1,000 tool calls" (the noun in the singular,
// made plural with an s).
func Of(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return Count(n) + " " + noun + "s"
}

// Count writes n with a comma between each group of three digits: 29,990.
func Count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Cycle writes a dependency cycle, given as its items with the first repeated at the end, as
// "a -> b -> a". A cycle of more than Max items names the first Max, counts the rest (noun, in
// the singular, is what they are) and still ends where it closes:
// "s1 -> s2 -> ... -> s10 -> (4,990 more steps) -> s1".
func Cycle(cycle []string, noun string) string {
	n := len(cycle) - 1 // the first item closes the cycle and is not counted twice
	if n <= Max {
		return strings.Join(cycle, " -> ")
	}
	return strings.Join(cycle[:Max], " -> ") + " -> (" + Of(n-Max, "more "+noun) + ") -> " + cycle[0]
}
