package bench

import (
	"strings"
	"testing"
)

func TestReportMarksBarsAndListsFailures(t *testing.T) {
	r := &Report{Arch: "linux/arm64", Emulated: "qemu-user", Quick: true}
	r.add(atMost("a", "enforced, within", 2, "x", 3, true, ""))
	r.add(atMost("b", "enforced, over", 0.6, "x", 0.5, true, "a | pipe"))
	r.add(atMost("c", "reported, over", 120, "µs", 100, false, ""))
	r.add(info("d", "no bar", 541, "B", ""))
	var ids []string
	for _, f := range r.Failed(true) {
		ids = append(ids, f.ID)
	}
	if strings.Join(ids, ",") != "b" {
		t.Fatalf("enforced failures: %v", ids)
	}
	if n := len(r.Failed(false)); n != 2 {
		t.Fatalf("all failures: %d", n)
	}
	md := r.Markdown()
	for _, want := range []string{"linux/arm64 under qemu-user (emulated", "| enforced, within | 2 x | <= 3 x | pass (enforced) |",
		"| enforced, over | 0.6 x | <= 0.5 x | **FAIL (enforced)** | a / pipe |", "| reported, over | 120 µs | <= 100 µs | **over** (reported) |",
		"| no bar | 541 B |  |  |  |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
