package main

import (
	"fmt"
	"strings"
)

// markdown is the report as people read it: one table per step count, every system with its
// durability setting beside its figures and its time as a multiple of harness-edge's.
func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# harness-edge beside its peers\n\n")
	fmt.Fprintf(&b, "`make bench-peers`, %s, %s, %d CPUs, harness-edge %s. Each of N sequential steps reads 20-60 lines\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.GoVersion, r.CPUs, or(r.Version, "(unversioned)"))
	fmt.Fprintf(&b, "of the Go standard library's source (seed %d) and makes them durable as the step's output before the\n", r.Seed)
	fmt.Fprintf(&b, "next step's output is (harness-edge reads the next lines while the previous step's fsync runs). Every\n")
	fmt.Fprintf(&b, "system's outputs were read back from disk and matched the text read, byte for byte.\n")
	rounds := fmt.Sprint(r.Rounds)
	for _, row := range r.Rows {
		if row.Rounds > 0 && row.Rounds < r.Rounds {
			rounds += fmt.Sprintf(" (%s: %d)", row.Name, row.Rounds)
		}
	}
	fmt.Fprintf(&b, "Times are in-process, medians of %s rounds; CPU is the whole process's; fsyncs come from one extra\n", rounds)
	fmt.Fprintf(&b, "round that counts them through Pebble's file system (\"-\": not counted); disk is every file the\n")
	fmt.Fprintf(&b, "system left after it closed. Took %.0f s.\n", r.DurationSec)
	for _, n := range r.Steps {
		fmt.Fprintf(&b, "\n## N = %d (%.0f B of text per step)\n\n", n, r.AppendedPerStep[n])
		fmt.Fprintf(&b, "| system | durability | ms/step | × harness-edge | CPU ms/step | fsyncs/step | disk after N |\n")
		fmt.Fprintf(&b, "|---|---|---|---|---|---|---|\n")
		for _, row := range r.Rows {
			f := row.At[n]
			fs := "-"
			if f.FsyncsPerStep != nil {
				fs = fmt.Sprintf("%.2f", *f.FsyncsPerStep)
			}
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.2f | %.3f | %s | %s |\n", row.Name, row.Durability, f.MsPerStep, f.RatioToHE,
				f.CPUMsPerStep, fs, mb(f.DiskBytes))
		}
		fmt.Fprintf(&b, "\noutputs sha256 (every system): %s\n", r.Rows[0].At[n].OutputsSHA256)
	}
	fmt.Fprintf(&b, "\n## What each system does per step\n\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "- %s: %s.\n", row.Name, row.Note)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "- %s.\n", s)
	}
	return b.String()
}

func mb(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}
