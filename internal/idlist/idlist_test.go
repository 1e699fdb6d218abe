package idlist_test

import (
	"fmt"
	"testing"

	"github.com/harness-edge/harness-edge/internal/idlist"
)

func ids(n int) []string {
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, fmt.Sprintf("s%d", i+1))
	}
	return out
}

func TestJoinNamesTenAndCountsTheRest(t *testing.T) {
	for _, c := range []struct {
		n    int
		sep  string
		want string
	}{
		{0, ", ", ""},
		{1, ", ", "s1"},
		{10, ",", "s1,s2,s3,s4,s5,s6,s7,s8,s9,s10"},
		{11, ", ", "s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 1 more"},
		{999, ", ", "s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 989 more"},
		{30000, ", ", "s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 29,990 more"},
	} {
		if got := idlist.Join(ids(c.n), c.sep); got != c.want {
			t.Errorf("%d ids: %q, want %q", c.n, got, c.want)
		}
	}
}

func TestJoinMoreSaysWhatTheRestAre(t *testing.T) {
	got := idlist.JoinMore(ids(1010), "; ", "insert")
	if want := "s1; s2; s3; s4; s5; s6; s7; s8; s9; s10 and 1,000 more inserts"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if got, want := idlist.JoinMore(ids(11), ", ", "insert"), "s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 1 more insert"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if got := idlist.JoinMore(ids(2), "; ", "insert"); got != "s1; s2" {
		t.Fatalf("two items: %q", got)
	}
}

func TestCycleNamesTenAndEndsWhereItCloses(t *testing.T) {
	cycle := func(n int) []string { return append(ids(n), "s1") }
	for n, want := range map[int]string{
		2:    "s1 -> s2 -> s1",
		10:   "s1 -> s2 -> s3 -> s4 -> s5 -> s6 -> s7 -> s8 -> s9 -> s10 -> s1",
		11:   "s1 -> s2 -> s3 -> s4 -> s5 -> s6 -> s7 -> s8 -> s9 -> s10 -> (1 more step) -> s1",
		5000: "s1 -> s2 -> s3 -> s4 -> s5 -> s6 -> s7 -> s8 -> s9 -> s10 -> (4,990 more steps) -> s1",
	} {
		if got := idlist.Cycle(cycle(n), "step"); got != want {
			t.Errorf("a cycle of %d: %q, want %q", n, got, want)
		}
	}
}

func TestCountGroupsThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 29990: "29,990",
		1234567: "1,234,567", -1234: "-1,234"} {
		if got := idlist.Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestOfSaysOneInTheSingular(t *testing.T) {
	for n, want := range map[int]string{0: "0 iterations", 1: "1 iteration", 2: "2 iterations", 1000: "1,000 iterations"} {
		if got := idlist.Of(n, "iteration"); got != want {
			t.Errorf("Of(%d) = %q, want %q", n, got, want)
		}
	}
	if got := idlist.Of(1, "tool call"); got != "1 tool call" {
		t.Errorf("%q", got)
	}
}
