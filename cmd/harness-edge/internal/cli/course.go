package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/control"
)

// The commands that change a harness's course: retry, ...

// whoAmI is the default of --by: $USER, else "unknown".
func whoAmI() string {
	if u := strings.TrimSpace(os.Getenv("USER")); u != "" {
		return u
	}
	return "unknown"
}

func newRetryCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		req    control.RetryRequest
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "retry ID [--step S] [--reason TEXT]",
		Short: "Take a failed harness (or one failed step) back to runnable, keeping its history; then resume it",
		Long: `Take a failed harness, or one failed step of it (--step), back to runnable. The failed steps
become ready again and the steps they blocked pending; a failed harness becomes paused, so that
'harness-edge resume ID' runs it. The history stays: the steps' attempt counters go on (the next
attempt is a retry), tool calls, sub-agents and events are kept. The retry is recorded durably:
a course event with who (--by, default $USER) and why (--reason), and the harness's status
reason. A running harness, a sub-agent (retry its parent), a completed harness or a step that
has not failed is refused, and nothing changes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.do(func(api *control.Conn) error {
				res, err := api.Retry(context.Background(), args[0], req)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(stdout, res)
				}
				what := "no failed step (it plans again)"
				if len(res.Steps) > 0 {
					what = "step " + strings.Join(res.Steps, ", ") + " ready again"
				}
				if len(res.Unblocked) > 0 {
					what += "; unblocked " + strings.Join(res.Unblocked, ", ")
				}
				fmt.Fprintf(stdout, "harness %s: retry: %s; it is %s: continue with `harness-edge resume %s`\n", res.HarnessID, what, res.Status, res.HarnessID)
				return nil
			})
		},
	}
	f := c.Flags()
	f.StringVar(&req.Step, "step", "", "retry only this failed step")
	f.StringVar(&req.Reason, "reason", "", "why (recorded with the retry)")
	f.StringVar(&req.By, "by", whoAmI(), "who retries (recorded with the retry)")
	f.BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return c
}
