package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/harness"
)

// newDecideCmd is `approve ID [GATE]` (approve true) or `reject ID [GATE] --reason TEXT`.
func newDecideCmd(g *globals, stdout io.Writer, approve bool) *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "approve ID [GATE]",
		Short: "Approve a harness's pending human gate (or one of its sub-agents'); then resume it",
		Long: `Approve the pending human gate of a harness, or of one of its sub-agents. Without GATE, the
only pending gate is meant; name it (g2, or CHILD-ID/g2) when there are several. The decision is
stored durably; 'harness-edge resume ID' continues the run. Approving a budget gate extends that
budget by the task's amount again; approving a side-effect (replay) gate runs the interrupted
call again.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !approve && strings.TrimSpace(reason) == "" {
				return usageError{errors.New("reject needs --reason TEXT: say why, for whoever replans")}
			}
			gate := ""
			if len(args) == 2 {
				gate = args[1]
			}
			return g.do(func(api *control.Conn) error {
				d, err := api.Decide(context.Background(), args[0], gate, approve, reason)
				if err != nil {
					return err
				}
				owner, _ := api.Owner()
				switch {
				case approve && d.Resumed:
					fmt.Fprintf(stdout, "harness %s: %s approved; the daemon (pid %d) resumes it\n",
						d.HarnessID, harness.DescribeGate(d.Gate.ID, d.Gate.Kind, d.Gate.StepID), owner.PID)
				case approve:
					fmt.Fprintf(stdout, "harness %s: %s approved; continue with `harness-edge resume %s`\n",
						d.HarnessID, harness.DescribeGate(d.Gate.ID, d.Gate.Kind, d.Gate.StepID), args[0])
				case d.Replanner != "":
					fmt.Fprintf(stdout, "harness %s: %s rejected: %s\n  the harness stays paused: on `resume %s`, %s replans by itself (told why); or `replan %s FILE` by hand first, or `stop %s`\n",
						d.HarnessID, harness.DescribeGate(d.Gate.ID, d.Gate.Kind, d.Gate.StepID), clip(reason), args[0], d.Replanner, args[0], args[0])
				default:
					fmt.Fprintf(stdout, "harness %s: %s rejected: %s\n  the harness stays paused: `replan %s FILE` skips or replaces the step, `resume %s` asks again, `stop %s` ends it\n",
						d.HarnessID, harness.DescribeGate(d.Gate.ID, d.Gate.Kind, d.Gate.StepID), clip(reason), args[0], args[0], args[0])
				}
				return nil
			})
		},
	}
	if !approve {
		c.Use = "reject ID [GATE] --reason TEXT"
		c.Short = "Reject a harness's pending human gate with a reason; the harness stays paused for replanning"
		c.Long = `Reject the pending human gate of a harness, or of one of its sub-agents, recording the reason.
The harness stays paused for replanning: 'resume' asks again at the same point (a rejected
side-effecting call is not run again), 'stop' ends it.`
		c.Flags().StringVar(&reason, "reason", "", "why the gate is rejected (required)")
	}
	return c
}

// pendingHint says how to go on from a paused harness: which gates wait for a human.
func pendingHint(m *harness.Manager, id string) string {
	gates, _ := m.PendingGates(id)
	return control.GateHint(id, gates)
}
