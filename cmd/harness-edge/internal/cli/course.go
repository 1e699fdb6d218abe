package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
	"github.com/harness-edge/harness-edge/sysinfo"
)

// The commands that change a harness's course: retry, ...

// whoAmI is the default of --by: $USER, else the name of the process's user (a cron job, a
// systemd unit or `env -i` has no $USER), else "uid N".
func whoAmI() string {
	if u := strings.TrimSpace(os.Getenv("USER")); u != "" {
		return u
	}
	return userName(user.Current)
}

// userName is the name current gives the process's user, or "uid N" when it gives none. The
// static binary is built with osusergo, so os/user reads /etc/passwd itself (no NSS): a uid
// that has no line there (a container run with --user 1234) has no name.
func userName(current func() (*user.User, error)) string {
	if u, err := current(); err == nil && strings.TrimSpace(u.Username) != "" {
		return strings.TrimSpace(u.Username)
	}
	return fmt.Sprintf("uid %d", os.Getuid())
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
a course event with who (--by, default $USER or your user name) and why (--reason), and the
harness's status reason. A running harness, a sub-agent (retry its parent), a completed harness
or a step that has not failed is refused, and nothing changes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return fetchAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (harness.RetryResult, error) {
				return api.Retry(ctx, args[0], req)
			}, func(res harness.RetryResult) error {
				what := "no failed step: its plan is kept as it is, and resume runs the steps not done yet"
				switch {
				case res.PlansAgain:
					what = "it has no plan yet: resume plans again"
				case len(res.Steps) > 0:
					what = "step " + idlist.Join(res.Steps, ", ") + " ready again"
				}
				if len(res.Unblocked) > 0 {
					what += "; unblocked " + idlist.Join(res.Unblocked, ", ")
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

// printRemoved prints what delete or prune removed (or would remove).
func printRemoved(w io.Writer, r control.DeleteResult) {
	verb := "deleted"
	if r.DryRun {
		verb = "would delete"
	}
	for _, h := range r.Harnesses {
		subs := ""
		if len(h.SubAgents) > 0 {
			subs = fmt.Sprintf(" with %s (%s)", plural(len(h.SubAgents), "sub-agent"), idlist.Join(h.SubAgents, ", "))
		}
		fmt.Fprintf(w, "%s %s (%s, last changed %s)%s: %s of records\n", verb, h.ID, h.Status, h.UpdatedAt.Local().Format(time.RFC3339), subs, sysinfo.FormatBytes(uint64(h.StoredBytes)))
		if h.Worktree != "" {
			fmt.Fprintf(w, "  its worktree %s was removed; its branch %s%s stays\n", h.Worktree, harness.BranchPrefix, h.ID)
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.ID, s.Why)
	}
	switch {
	case r.DryRun:
		fmt.Fprintf(w, "%s would be deleted; the store takes %s on disk (dry run: nothing changed)\n", plural(len(r.Harnesses), "harness"), sysinfo.FormatBytes(r.BytesBefore))
	default:
		fmt.Fprintf(w, "%s deleted; the store took %s on disk, now %s (%s given back)\n", plural(len(r.Harnesses), "harness"),
			sysinfo.FormatBytes(r.BytesBefore), sysinfo.FormatBytes(r.BytesAfter), sysinfo.FormatBytes(r.Freed))
	}
}

func newDeleteCmd(g *globals, stdout io.Writer) *cobra.Command {
	var force, asJSON bool
	c := &cobra.Command{
		Use:   "delete ID [--force]",
		Short: "Remove a harness with its sub-agents, events, index and task from the store, and give the disk back",
		Long: `Remove a harness from the store: its checkpoint chain, event log, index entry and task, and
those of its sub-agents, in one synced batch (after a crash, all of it is gone or none), then
compact their keys so that the disk is given back at once. Refused, changing nothing: a
sub-agent (delete its parent), a harness that runs (pause it first) or is queued in the daemon,
and, without --force, one that waits for a human or was interrupted while running.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return fetchAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (control.DeleteResult, error) {
				return api.Delete(ctx, args[0], force)
			}, func(res control.DeleteResult) error {
				printRemoved(stdout, res)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&force, "force", false, "delete a harness that waits for a human or was interrupted")
	c.Flags().BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return c
}

func newPruneCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		req      control.PruneRequest
		statuses []string
		asJSON   bool
	)
	c := &cobra.Command{
		Use:   "prune --older-than 30d [--status completed,failed] [--dry-run]",
		Short: "Delete the harnesses that ended long ago (with their sub-agents), and give the disk back",
		Long: `Delete every top-level harness in the given statuses (default completed and failed) that last
changed longer ago than --older-than (30d, 2w, 36h), with its sub-agents, in one synced batch,
then compact so the disk is given back. Harnesses in those statuses that are queued or wait for
a human are skipped and listed; running and interrupted ones (status running) are never
pruned. --dry-run lists what would go and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(req.OlderThan) == "" {
				return usageError{fmt.Errorf("prune needs --older-than AGE (e.g. 30d): how long ago a harness last changed")}
			}
			if _, err := control.ParseAge(req.OlderThan); err != nil {
				return usageError{fmt.Errorf("--older-than: %w", err)}
			}
			for _, s := range statuses {
				for _, one := range strings.Split(s, ",") {
					if one = strings.TrimSpace(one); one != "" {
						req.Statuses = append(req.Statuses, statefmt.Status(one))
					}
				}
			}
			if cmd.Flags().Changed("status") && len(req.Statuses) == 0 {
				// An empty list is not "the default": the default deletes.
				return usageError{fmt.Errorf("--status %q names no status: name the statuses to prune (completed, failed, paused, created), or leave --status out for completed,failed", strings.Join(statuses, ","))}
			}
			return fetchAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (control.DeleteResult, error) {
				return api.Prune(ctx, req)
			}, func(res control.DeleteResult) error {
				printRemoved(stdout, res)
				return nil
			})
		},
	}
	f := c.Flags()
	f.StringVar(&req.OlderThan, "older-than", "", "delete harnesses that last changed longer ago than this (30d, 2w, 36h)")
	f.StringSliceVar(&statuses, "status", nil, "the statuses to prune, comma-separated (default completed,failed; also paused, created)")
	f.BoolVar(&req.DryRun, "dry-run", false, "list what would be deleted; change nothing")
	f.BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return c
}

// dependsOn is a step's DEPENDS ON cell: its first idlist.Max dependencies and how many more
// there are, so that a step that waits for thousands of others keeps its row a line long (the
// whole list is in `plan --json`).
func dependsOn(s statefmt.ExecutionStep) string {
	return idlist.Join(s.Dependencies, ",")
}

// printPlan prints a plan: its steps with their status, agent, attempts and dependencies.
func printPlan(w io.Writer, id string, p *statefmt.ExecutionPlan) {
	if p == nil {
		fmt.Fprintf(w, "harness %s has no plan yet (its agent plans when it starts)\n", id)
		return
	}
	tw := newColumns(w)
	fmt.Fprintln(tw, "STEP\tAGENT\tSTATUS\tATTEMPTS\tDEPENDS ON\tDESCRIPTION")
	for _, s := range p.Steps {
		crit := ""
		if s.Critical {
			crit = " (critical)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, crit, s.AssignedAgent, s.Status, s.Attempts, dependsOn(s), oneLine(s.Description))
	}
	tw.Flush()
}

func newPlanCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "plan ID [--json]",
		Short: "Print a harness's plan: steps, status, agent, attempts, dependencies",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return readAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (*statefmt.ExecutionPlan, error) {
				st, err := api.State(ctx, args[0])
				if err != nil {
					return nil, err
				}
				return st.Plan, nil
			}, func(p *statefmt.ExecutionPlan) error {
				printPlan(stdout, args[0], p)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	return c
}

// replanTableMax is the longest plan replan prints as a table after the change; a longer one
// (a change may insert thousands of steps) is summed up in a line, and `plan` prints it whole.
const replanTableMax = 100

// stepCounts says how many steps of a plan are in each status: "3 pending, 30,000 blocked".
func stepCounts(p *statefmt.ExecutionPlan) string {
	n := map[statefmt.StepStatus]int{}
	for _, s := range p.Steps {
		n[s.Status]++
	}
	var parts []string
	for _, s := range statefmt.StepStatuses {
		if n[s] > 0 {
			parts = append(parts, idlist.Count(n[s])+" "+string(s))
		}
	}
	return strings.Join(parts, ", ")
}

func newReplanCmd(g *globals, stdin io.Reader, stdout io.Writer) *cobra.Command {
	var (
		req    control.ReplanRequest
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "replan ID FILE [--reason TEXT] [--by WHO]",
		Short: "Change a harness's plan (skip, replace, insert steps, change dependencies) from a YAML or JSON file",
		Long: `Change the plan of a harness that does not run (paused, created or failed) with a plan change
written in YAML or JSON (FILE, or - for standard input; at most 4 MiB, as a task file):

  skip: [ship]                       # completed without running (its output says so)
  replace:
    build: {description: "...", agent: B, critical: false, actions: [{output: built}]}
  insert:
    - {id: check, description: "...", agent: A, dependsOn: [build], actions: [...]}
  dependsOn:
    ship: [check]

The change is checked whole first, like a task file: every problem with its line (unknown steps
or agents, completed steps, new ids that exist, dependency cycles), and one problem refuses all
of it. Applied, it is recorded durably with who (--by, default $USER or your user name) and why
(--reason), shown by 'show' and 'events'. A failed harness stays failed: 'retry' then makes it
runnable.`,
		Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			// The whole change or none of it: one over the limit is refused before anything is
			// sent, never cut to a prefix that may itself be a valid change.
			data, err := task.ReadPlanChange(args[1], stdin)
			if err != nil {
				return control.ReplanUnchanged(args[0], err)
			}
			req.Change, req.Name = string(data), args[1]
			return fetchAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (harness.ReplanResult, error) {
				return api.Replan(ctx, args[0], req)
			}, func(res harness.ReplanResult) error {
				fmt.Fprintf(stdout, "harness %s: replanned: %s\n", res.HarnessID, res.Summary)
				if res.Plan != nil && len(res.Plan.Steps) > replanTableMax {
					fmt.Fprintf(stdout, "the plan has %s steps (%s): `harness-edge plan %s` lists them\n",
						idlist.Count(len(res.Plan.Steps)), stepCounts(res.Plan), res.HarnessID)
				} else {
					printPlan(stdout, res.HarnessID, res.Plan)
				}
				if len(res.Superseded) > 0 {
					fmt.Fprintf(stdout, "ended the sub-agents of the steps it skipped or replaced: %s\n", idlist.Join(res.Superseded, ", "))
				}
				next := "continue with `harness-edge resume " + res.HarnessID + "`"
				if res.Status == statefmt.StatusFailed {
					next = "run it again with `harness-edge retry " + res.HarnessID + "`, then resume"
				}
				fmt.Fprintf(stdout, "it is %s: %s\n", res.Status, next)
				return nil
			})
		},
	}
	f := c.Flags()
	f.StringVar(&req.Reason, "reason", "", "why (recorded with the change)")
	f.StringVar(&req.By, "by", whoAmI(), "who changes the plan (recorded with the change)")
	f.BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return c
}

func newCheckpointCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		req    control.CheckpointRequest
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "checkpoint ID --name NAME",
		Short: "Keep a harness's newest checkpoint under a name, to roll back to later",
		Long: `Keep the newest checkpoint of a harness that does not run (paused, waiting for a human,
created, failed, completed) under a name: a copy of its state, stored apart from the chain, so
the chain's retention never drops it. 'harness-edge rollback ID --to NAME' goes back to it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if strings.TrimSpace(req.Name) == "" {
				return usageError{fmt.Errorf("checkpoint needs --name NAME")}
			}
			return fetchAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (store.NamedPoint, error) {
				return api.Checkpoint(ctx, args[0], req)
			}, func(p store.NamedPoint) error {
				fmt.Fprintf(stdout, "harness %s: checkpoint %d named %s (%s, %d/%d steps done, %s)\n", args[0], p.Seq, p.Name, p.Status, p.StepsDone, p.Steps, sysinfo.FormatBytes(uint64(p.Bytes)))
				return nil
			})
		},
	}
	c.Flags().StringVar(&req.Name, "name", "", "the checkpoint's name (letters, digits, '.', '_', '-')")
	c.Flags().StringVar(&req.By, "by", whoAmI(), "who names it (recorded)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return c
}

func newCheckpointsCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "checkpoints ID [--json]",
		Short: "List what a harness can be rolled back to: its named checkpoints and its chain's recent ones",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return readAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (control.Checkpoints, error) {
				return api.ListCheckpoints(ctx, args[0])
			}, func(l control.Checkpoints) error {
				tw := newColumns(stdout)
				fmt.Fprintln(tw, "NAME\tSEQ\tSTATUS\tSTEPS DONE\tAT")
				for _, p := range l.Named {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d/%d\t%s\n", p.Name, p.Seq, p.Status, p.StepsDone, p.Steps, p.At.Local().Format(time.RFC3339))
				}
				tw.Flush()
				fmt.Fprintf(stdout, "recent: checkpoints %d to %d (`rollback %s --to SEQ`; `inspect %s` lists them)\n", l.FirstSeq, l.HeadSeq, args[0], args[0])
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return c
}

func newRollbackCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		req    control.RollbackRequest
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "rollback ID --to NAME|SEQ [--reason TEXT]",
		Short: "Make an earlier checkpoint (named, or a recent one by number) a harness's newest; then resume it",
		Long: `Make the state of a named checkpoint, or of a recent checkpoint of the chain (by sequence
number), the newest checkpoint of a harness that does not run. The chain stays append-only: the
rollback is a new checkpoint, with a course event saying who rolled back to what and why. The
harness is paused afterwards; 'resume' runs the steps after the point again. Files the steps
wrote in the workspace are not rolled back.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if strings.TrimSpace(req.To) == "" {
				return usageError{fmt.Errorf("rollback needs --to NAME or --to SEQ")}
			}
			return fetchAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (harness.RollbackResult, error) {
				return api.Rollback(ctx, args[0], req)
			}, func(res harness.RollbackResult) error {
				fmt.Fprintf(stdout, "harness %s: rolled back to %s (%d/%d steps done); it is %s: continue with `harness-edge resume %s`\n",
					res.HarnessID, harness.CheckpointLabel(res.To), res.StepsDone, res.Steps, res.Status, res.HarnessID)
				return nil
			})
		},
	}
	f := c.Flags()
	f.StringVar(&req.To, "to", "", "a checkpoint's name, or a sequence number of the chain")
	f.StringVar(&req.Reason, "reason", "", "why (recorded)")
	f.StringVar(&req.By, "by", whoAmI(), "who rolls back (recorded)")
	f.BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return c
}
