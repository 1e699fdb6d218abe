package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/bench"
)

func newBenchCmd(g *globals, stdout, stderr io.Writer) *cobra.Command {
	var (
		quick, asJSON, check bool
		dir, markdown        string
		emulated             string
	)
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure this device: per-step overhead, keyframes, storage, end-to-end steps, restore, fsync, direct path, RSS/CPU, binary size, task files",
		Long: `Run the benchmark suite on this device, each figure beside its bar.
Scratch stores go in a temporary directory inside the store directory, so the durable figures
and the fsync latency are those of the store's disk (an SD card shows here). The full run took
39 s on the 2-core build machine on a quiet day and 59-91 s under load (longer on a slow disk),
--quick 20 s and 50 s. --check exits 1
when a bar that is robust on noisy machines is broken (the 50 ms per-step requirement, the storage ratios, the flatness ratio, the
binary size); timing-sensitive bars are reported only.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if dir == "" {
				store, err := g.storeDir()
				if err != nil {
					return err
				}
				if err := os.MkdirAll(store, 0o700); err != nil {
					return err
				}
				dir = store
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			scratch, err := os.MkdirTemp(dir, "bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(scratch)
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := bench.Run(ctx, bench.Options{Quick: quick, Dir: scratch, Binary: exe, Emulated: emulated, Version: version, Log: stderr})
			if err != nil {
				return err
			}
			md := rep.Markdown()
			if markdown != "" {
				if err := os.WriteFile(markdown, []byte(md), 0o644); err != nil {
					return err
				}
			}
			if asJSON {
				if err := writeJSON(stdout, rep); err != nil {
					return err
				}
			} else {
				fmt.Fprint(stdout, md)
			}
			if failed := rep.Failed(true); check && len(failed) > 0 {
				for _, f := range failed {
					fmt.Fprintf(stderr, "bench: %s: %s %s broke its bar %s\n", f.Name, fmtNum(f.Value), f.Unit, f.Bar)
				}
				return exitError{ExitError, fmt.Errorf("%d enforced bar(s) broken", len(failed))}
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&quick, "quick", false, "fewer steps, no 10,000-checkpoint restore")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (default: a Markdown table)")
	f.BoolVar(&check, "check", false, "exit 1 when an enforced bar is broken")
	f.StringVar(&dir, "dir", "", "where to put the scratch stores (default: inside the store directory, to measure its disk)")
	f.StringVar(&markdown, "markdown", "", "also write the Markdown table to FILE")
	f.StringVar(&emulated, "emulated", "", "say the suite runs under an emulator (e.g. qemu-user): the 50 ms bar applies, the µs bars do not")
	return c
}

func fmtNum(v float64) string { return fmt.Sprintf("%.4g", v) }
