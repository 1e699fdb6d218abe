package bench

import (
	"fmt"
	"strings"
)

// Markdown is the report as a table: every figure with its bar and whether it passed.
func (r *Report) Markdown() string {
	var b strings.Builder
	where := r.Arch
	if r.Emulated != "" {
		where += " under " + r.Emulated + " (emulated: a pessimistic stand-in for a real ARM board)"
	}
	mode := "full"
	if r.Quick {
		mode = "--quick"
	}
	fmt.Fprintf(&b, "# harness-edge bench: %s\n\n", where)
	fmt.Fprintf(&b, "harness-edge %s, engine %s, %s, %d CPUs; %s run of %.0f s started %s.\n\n", r.Version, r.Engine, r.GoVersion, r.CPUs,
		mode, r.DurationSec, r.Started.Format("2006-01-02 15:04 UTC"))
	b.WriteString("| figure | value | bar | result | note |\n|---|---|---|---|---|\n")
	for _, f := range r.Figures {
		result := ""
		switch {
		case f.Pass == nil:
		case *f.Pass && f.Enforced:
			result = "pass (enforced)"
		case *f.Pass:
			result = "pass"
		case f.Enforced:
			result = "**FAIL (enforced)**"
		default:
			result = "**over** (reported)"
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s |\n", f.Name, num(f.Value), f.Unit, f.Bar, result, strings.ReplaceAll(f.Note, "|", "/"))
	}
	b.WriteString("\nEnforced bars are robust on noisy shared machines; `harness-edge bench --check` fails on them. " +
		"The others are timing-sensitive and reported only.\n")
	return b.String()
}
