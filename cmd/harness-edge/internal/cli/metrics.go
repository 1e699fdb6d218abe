package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/control"
)

func newMetricsCmd(g *globals, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "metrics",
		Short: "The store's metrics in Prometheus text format (as the daemon's GET /metrics)",
		Long: `Print the store's metrics in the Prometheus text format: harnesses by status, plan steps by
status, tool calls by outcome, checkpoints, bytes stored, gates waiting, and (from a daemon) the
governor's waits since it started. Through the daemon when one owns the store, else from the
store itself.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return g.read(func(c *control.Conn) error { return c.Metrics(context.Background(), stdout) })
		},
	}
}
