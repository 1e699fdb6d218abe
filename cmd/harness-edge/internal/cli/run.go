package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/harness"

	"github.com/harness-edge/harness-edge/runtime/clock"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/sysinfo"
)

// oneShot sets the garbage collector for a command that reads, prints and exits: it runs
// only when the heap nears oneShotHeap of the machine's memory (a read of a large harness
// allocates a few times its state, and collecting that on the way cost a third of the
// command's time). It returns what puts the settings back.
func oneShot() (restore func()) {
	var info syscall.Sysinfo_t
	total := uint64(0)
	if syscall.Sysinfo(&info) == nil {
		total = uint64(info.Totalram) * uint64(info.Unit)
	}
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(oneShotHeap(total))
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

// oneShotHeap is the heap a one-shot read may reach before the collector runs, on a machine of
// total bytes of memory (0: unknown): a quarter of it, at least 16 MiB and at most 1 GiB, so
// that a small device is not pushed into swap by a read that a workstation takes in its stride.
func oneShotHeap(total uint64) int64 {
	if total == 0 {
		return 1 << 30
	}
	return int64(min(max(total/4, 16<<20), 1<<30))
}

// progress prints events for a person watching a terminal.
func progress(w io.Writer) event.Sink {
	return event.SinkFunc(func(e event.Event) {
		switch e.Type {
		case event.StateTransition:
			if e.Reason != "" {
				fmt.Fprintf(w, "  harness %s: %s (%s)\n", e.HarnessID, e.To, e.Reason)
			} else {
				fmt.Fprintf(w, "  harness %s: %s\n", e.HarnessID, e.To)
			}
		case event.StepStarted:
			fmt.Fprintf(w, "  > step %s (attempt %d)\n", e.StepID, e.Attempt)
		case event.StepCompleted:
			fmt.Fprintf(w, "  + step %s completed\n", e.StepID)
		case event.StepRetry:
			fmt.Fprintf(w, "  ~ step %s: %s (retry in %.1fs)\n", e.StepID, e.Message, e.DelayMs/1000)
		case event.StepFailed:
			fmt.Fprintf(w, "  ! step %s failed: %s\n", e.StepID, e.Message)
		case event.ToolCall:
			ok := e.Success != nil && *e.Success
			fmt.Fprintf(w, "    tool %s (%.1f ms, ok=%v)\n", e.Tool, e.DurationMs, ok)
		case event.Warning:
			fmt.Fprintf(w, "  warning: %s\n", e.Message)
		case event.Gate:
			fmt.Fprintf(w, "  ? %s: %s %s\n", harness.DescribeGate(e.GateID, e.Kind, e.StepID), e.Action, e.Message+e.Reason)
		case event.SubAgent:
			fmt.Fprintf(w, "  = sub-agent %s (%s, step %s): %s %s\n", e.SubAgentID, e.Agent, e.StepID, e.Outcome, e.Message)
		case event.SideEffect:
			if e.Action != "intent" && e.Action != "receipt" {
				fmt.Fprintf(w, "    side effect %s (step %s): %s %s\n", e.Tool, e.StepID, e.Action, e.Message)
			}
		case event.Iteration:
			if e.Outcome == event.IterStarted {
				fmt.Fprintf(w, "    iteration %d (step %s) started %s\n", e.Iteration, e.StepID, e.Time.Local().Format("15:04:05"))
				return
			}
			line := fmt.Sprintf("    iteration %d (step %s): %s", e.Iteration, e.StepID, e.Outcome)
			if e.DurationMs > 0 {
				line += fmt.Sprintf(", %.1fs", e.DurationMs/1000)
			}
			if u := e.Usage; u != nil {
				line += ", " + usageText(*u)
			}
			if e.Outcome != event.IterContinue && e.Outcome != event.IterCompleted && e.Message != "" {
				line += ": " + resultCell(e.Message)
			}
			fmt.Fprintln(w, line)
		case event.Compaction:
			fmt.Fprintf(w, "    context compacted (step %s, %s): %s\n", e.StepID, e.Outcome, e.Message)
		case event.Phase:
			fmt.Fprintf(w, "  phase %s %s\n", e.Phase, e.Action)
		case event.Course:
			fmt.Fprintf(w, "  %s by %s: %s\n", e.Action, e.By, e.Message)
		case event.Governor:
			if e.Action == "waiting" {
				fmt.Fprintf(w, "  waiting for resources before step %s: %s\n", e.StepID, e.Message)
			} else {
				fmt.Fprintf(w, "  resources free again after %.1fs\n", e.WaitMs/1000)
			}
		}
	})
}

// runFlags are shared by run and resume.
type runFlags struct{ json, progress bool }

// runHarness runs h until it ends or is interrupted (SIGINT/SIGTERM pause it) and reports.
func runHarness(m *harness.Manager, h *harness.Harness, f runFlags, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := h.Run(ctx)
	out := h.Output("harness")
	return report(out, err, f, stdout, h.Store(), func() string { return pendingHint(m, h.ID()) })
}

// report prints a task's outcome and turns it into the exit code.
func report(out harness.TaskOutput, err error, f runFlags, stdout io.Writer, db harness.Store, hint func() string) error {
	if err != nil && !errors.Is(err, harness.ErrPaused) {
		return err
	}
	var stored int
	type sizer interface {
		ChainBytes(id string) (int, error)
	}
	if in, ok := db.(sizer); ok && out.HarnessID != "" {
		if n, ierr := in.ChainBytes(out.HarnessID); ierr == nil {
			stored = n
		}
	}
	if f.json {
		b, _ := json.Marshal(struct {
			Type   string             `json:"type"`
			Result harness.TaskOutput `json:"result"`
		}{"result", out})
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "%s", summary(out, stored))
	}
	switch out.Status {
	case statefmt.StatusCompleted:
		return nil
	case statefmt.StatusPaused:
		if strings.HasPrefix(out.Reason, harness.ReasonDiskFull) {
			return exitError{ExitWaiting, fmt.Errorf("harness %s is paused: %s: free some space, then `harness-edge resume %s` (a daemon resumes it by itself)", out.HarnessID, out.Reason, out.HarnessID)}
		}
		return exitError{ExitWaiting, fmt.Errorf("harness %s is paused: %s", out.HarnessID, hint())}
	default:
		return exitError{ExitError, fmt.Errorf("task %s %s: %s", out.TaskID, out.Status, clip(out.Reason))}
	}
}

func summary(o harness.TaskOutput, stored int) string {
	var b strings.Builder
	name := o.HarnessID
	if name == "" {
		name = "task " + o.TaskID + " (direct path, no harness)"
	} else {
		name = "harness " + name
	}
	done := 0
	for _, s := range o.Steps {
		if s.Status == statefmt.StepCompleted {
			done++
		}
	}
	fmt.Fprintf(&b, "%s: %s", name, o.Status)
	if o.Reason != "" {
		fmt.Fprintf(&b, " (%s)", clip(o.Reason))
	}
	fmt.Fprintf(&b, "\n  steps %d/%d completed, %s", done, len(o.Steps), plural(o.ToolCalls, "tool call"))
	if o.HarnessID != "" {
		fmt.Fprintf(&b, ", %s, %d bytes stored", plural(o.Checkpoints, "checkpoint"), stored)
	}
	fmt.Fprintf(&b, ", %.0f ms\n", o.DurationMs)
	if o.Output != "" {
		fmt.Fprintf(&b, "output:\n%s\n", indent(o.Output))
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// ownManager makes this process the store's owner (its control socket serves other commands
// while it runs) with a manager whose events go where the flags say.
func (g *globals) ownManager(f runFlags, stdout io.Writer) (*harness.Manager, func(), error) {
	var sinks []event.Sink
	switch {
	case f.json:
		sinks = append(sinks, event.NewJSONLines(stdout))
	case f.progress || isTTY(stdout): // progress on a terminal, not in pipes
		sinks = append(sinks, progress(stdout))
	}
	dir, err := g.storeDir()
	if err != nil {
		return nil, nil, err
	}
	o, err := control.Own(dir, control.Config{Owner: control.OwnerRun, Options: harness.Options{Sinks: sinks}, Version: version})
	if err != nil {
		return nil, nil, err
	}
	return o.Server().Manager(), func() { o.Close() }, nil
}

func newRunCmd(g *globals, stdout io.Writer) *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run TASK",
		Short: "Run a task file: a durable harness (or the direct path for longRunning: false)",
		Long: `Run a task file. A long-running task runs in a durable harness, checkpointed after every
step: if the process dies, 'harness-edge resume ID' continues from the last checkpoint. Ctrl-C
pauses the harness cleanly (exit 3). Exit codes: 0 completed, 1 failed or error, 2 usage,
3 paused or waiting for a human.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			t, err := task.Load(args[0])
			if err != nil {
				return err
			}
			if t.LongRunning != nil && !*t.LongRunning {
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				out, err := harness.RunDirect(ctx, t, clock.RealClock{})
				return report(out, err, f, stdout, nil, nil)
			}
			m, release, err := g.ownManager(f, stdout)
			if err != nil {
				return err
			}
			defer release()
			// The workspace is taken before the harness exists: a run refused because another
			// harness holds it creates nothing.
			ws, err := harness.LockWorkspace(t, t.ID)
			if err != nil {
				return err
			}
			defer ws.Release()
			h, err := m.Create(t)
			if err != nil {
				return err
			}
			h.UseWorkspaceLock(ws)
			return runHarness(m, h, f, stdout)
		},
	}
	c.Flags().BoolVar(&f.json, "json", false, "stream events as JSON lines, then the result")
	c.Flags().BoolVar(&f.progress, "progress", false, "print progress lines even when stdout is not a terminal (a log, a pipe)")
	return c
}

func newResumeCmd(g *globals, stdout io.Writer) *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "resume ID",
		Short: "Continue a paused or interrupted harness from its last checkpoint (in the daemon, when one owns the store)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if dir, err := g.storeDir(); err == nil {
				if c, err := control.Dial(dir); err == nil {
					if c.Owner.Owner != control.OwnerDaemon {
						return &control.OwnedError{Dir: dir, Owner: c.Owner}
					}
					if err := c.Resume(context.Background(), args[0]); err != nil {
						return err
					}
					fmt.Fprintf(stdout, "harness %s: queued in the daemon (pid %d); follow it with `harness-edge events %s --follow`\n", args[0], c.Owner.PID, args[0])
					return nil
				}
			}
			m, release, err := g.ownManager(f, stdout)
			if err != nil {
				return err
			}
			defer release()
			h, err := m.ResumeFromCheckpoint(args[0])
			if err != nil {
				return err
			}
			if gates, _ := m.PendingGates(args[0]); len(gates) > 0 {
				return &control.WaitingError{HarnessID: args[0], Gates: gates}
			}
			return runHarness(m, h, f, stdout)
		},
	}
	c.Flags().BoolVar(&f.json, "json", false, "stream events as JSON lines, then the result")
	c.Flags().BoolVar(&f.progress, "progress", false, "print progress lines even when stdout is not a terminal (a log, a pipe)")
	return c
}

func newShowCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show ID",
		Short: "Show a harness: status, plan and step statuses, counts, last checkpoint (--json: HarnessState JSON v1)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			defer oneShot()()
			return g.read(func(api *control.Conn) error {
				if asJSON {
					if err := api.WriteStateJSON(context.Background(), args[0], stdout); err != nil {
						return err
					}
					_, err := io.WriteString(stdout, "\n")
					return err
				}
				st, err := api.State(context.Background(), args[0])
				if err != nil {
					return err
				}
				w := bufio.NewWriterSize(stdout, 64<<10)
				printState(w, st)
				if orphaned(api, st.Status) {
					fmt.Fprintf(w, "\n%s\n", orphanNote(st.HarnessID))
				}
				return w.Flush()
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the HarnessState as JSON v1")
	return c
}

// orphaned says whether a harness of this status is marked running with no process running it:
// the store was opened here, so no process owns it, and whoever ran the harness died (a kill, a
// power cut) before it could record that it stopped.
func orphaned(api *control.Conn, status statefmt.Status) bool {
	_, owned := api.Owner()
	return !owned && status == statefmt.StatusRunning
}

// orphanNote says what an orphaned harness is and how to go on.
func orphanNote(id string) string {
	return fmt.Sprintf("%s is marked running, but no process runs it: the one that did was killed or lost power. `harness-edge resume %s` goes on from its last checkpoint.", id, id)
}

func printState(w io.Writer, st *statefmt.HarnessState) {
	fmt.Fprintf(w, "harness %s  agent %s  task %s\n", st.HarnessID, st.AgentName, st.TaskID)
	fmt.Fprintf(w, "status   %s", st.Status)
	if st.StatusReason != "" {
		fmt.Fprintf(w, " (%s)", clip(st.StatusReason))
	}
	fmt.Fprintf(w, "\ncreated  %s\nupdated  %s\n", st.CreatedAt.Format(time.RFC3339), st.UpdatedAt.Format(time.RFC3339))
	if st.ParentHarnessID != "" {
		fmt.Fprintf(w, "parent   %s\n", st.ParentHarnessID)
	}
	last := "never"
	if st.LastCheckpointAt != nil {
		last = st.LastCheckpointAt.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "counts   %s, %s, %s (last %s)\n", plural(st.TotalToolCalls, "tool call"), plural(st.Iterations, "iteration"), plural(st.CheckpointCount, "checkpoint"), last)
	if b := st.Budget; b != nil {
		fmt.Fprintf(w, "budget   tool calls %d/%s, tokens %d/%s, wall clock %v/%s", st.TotalToolCalls, limit(int64(b.ToolCalls)),
			b.TokensUsed, limit(b.Tokens), b.WallClockUsed.Round(time.Millisecond), limitDur(b.WallClock))
		if b.CostMicroUSD > 0 || b.CostMicroUSDUsed > 0 {
			lim := "unlimited"
			if b.CostMicroUSD > 0 {
				lim = fmt.Sprintf("$%.4f", statefmt.USD(b.CostMicroUSD))
			}
			fmt.Fprintf(w, ", cost $%.4f/%s", statefmt.USD(b.CostMicroUSDUsed), lim)
		}
		fmt.Fprintln(w)
	}
	defer printExtras(w, st)
	if st.Plan == nil {
		fmt.Fprintln(w, "plan     none yet")
		return
	}
	fmt.Fprintln(w, "plan")
	tw := newColumns(w)
	fmt.Fprintln(tw, "  STEP\tAGENT\tSTATUS\tATTEMPTS\tDEPENDS ON\tRESULT")
	for _, s := range st.Plan.Steps {
		res := ""
		switch {
		case s.Error != nil:
			res = *s.Error
		case s.Output != nil:
			res = *s.Output
		}
		res = resultCell(res)
		crit := ""
		if s.Critical {
			crit = " (critical)"
		}
		fmt.Fprintf(tw, "  %s%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, crit, s.AssignedAgent, s.Status, s.Attempts, dependsOn(s), res)
	}
	tw.Flush()
}

// resultCell is a RESULT cell of show: the first line of a step's output (or error) that is
// not blank, and " ..." when more follows it. An output that starts with blank lines (a model's
// answer often does) shows its first words, not nothing.
func resultCell(res string) string {
	whole := len(res)
	res = strings.TrimLeft(res, " \t\r\n")
	line, rest, more := strings.Cut(res, "\n")
	line = strings.TrimRight(line, " \t\r")
	if len(line) > cellMax {
		return clipOf(line, whole)
	}
	line = oneLine(line)
	if more && strings.TrimSpace(rest) != "" {
		line += " ..."
	}
	return line
}

// plural is n and noun, the noun in the plural unless n is 1: "1 record", "3 records", "1
// harness", "0 harnesses".
func plural[N ~int | ~int64 | ~uint64](n N, noun string) string {
	s := fmt.Sprint(n) + " " + noun
	if n == 1 {
		return s
	}
	if strings.HasSuffix(noun, "s") || strings.HasSuffix(noun, "sh") || strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "x") {
		return s + "es"
	}
	return s + "s"
}

func limit(n int64) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

func limitDur(d time.Duration) string {
	if d == 0 {
		return "unlimited"
	}
	return d.String()
}

// printExtras prints a state's gates, sub-agents and side-effect journal.
func printExtras(w io.Writer, st *statefmt.HarnessState) {
	tw := newColumns(w)
	defer tw.Flush()
	if len(st.Gates) > 0 {
		fmt.Fprintln(tw, "gates")
		fmt.Fprintln(tw, "  GATE\tKIND\tSTEP\tSTATUS\tOPENED\tREASON")
		for _, g := range st.Gates {
			reason := g.Reason
			if g.Status == statefmt.GatePending && reason == "" {
				// What a pending gate waits on, as the paused harness's message words it.
				reason = harness.DescribeGate(g.ID, g.Kind, g.StepID) + " waits for a human"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Kind, g.StepID, g.Status, g.CreatedAt.Format(time.RFC3339), clip(reason))
		}
	}
	if len(st.SubAgentIDs) > 0 {
		fmt.Fprintln(tw, "sub-agents")
		fmt.Fprintln(tw, "  HARNESS\tAGENT\tSTEP\tSTATUS\tTRY\tRESULT")
		for _, id := range st.SubAgentIDs {
			r := st.SubAgentResults[id]
			res := ""
			switch {
			case r.Error != nil:
				res = *r.Error
			case r.Output != nil:
				res = *r.Output
			}
			res = resultCell(res)
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\n", id, r.AgentName, r.StepID, r.Status, r.Attempts, res)
		}
	}
	if l := st.AgentLoopSnapshot; l != nil && st.Plan != nil && st.CurrentStepIndex < len(st.Plan.Steps) {
		fmt.Fprintf(tw, "agent loop  step %s, iteration %d, %s", st.Plan.Steps[st.CurrentStepIndex].ID, l.Iteration, plural(len(l.Messages), "message"))
		if len(l.Handoff) > 0 {
			fmt.Fprintf(tw, ", handoff %s", l.Handoff)
		}
		fmt.Fprintln(tw)
	}
	if len(st.SideEffects) > 0 {
		fmt.Fprintln(tw, "side effects in flight")
		fmt.Fprintln(tw, "  STEP\tTOOL\tARGUMENTS\tSTATE")
		for _, e := range st.SideEffects {
			state := "intent (may have run)"
			if e.Result != nil {
				state = fmt.Sprintf("receipt (success=%v)", e.Result.Success)
			}
			if e.GateID != "" {
				state += ", gate " + e.GateID
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.StepID, e.Tool, e.Arguments, state)
		}
	}
}

func newEventsCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON, follow bool
	c := &cobra.Command{
		Use:   "events ID",
		Short: "Print a harness's durable event log (--follow: and new events as they come, until it ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var last uint64
			// Printed through a buffer: a long log is thousands of lines. Following, each event
			// is flushed as it comes.
			w := bufio.NewWriterSize(stdout, 64<<10)
			defer w.Flush()
			print := func(e event.Event) error {
				printEvent(w, e, asJSON)
				last = e.N
				if follow {
					return w.Flush()
				}
				return nil
			}
			err := g.read(func(api *control.Conn) error {
				return api.Events(ctx, args[0], 0, follow, print)
			})
			if errors.Is(err, control.ErrOwnerGone) {
				// The owner ended (a foreground run finishing, a daemon stopping, or killed):
				// what it wrote last is in the store, which is free now.
				var status statefmt.Status
				err = g.read(func(api *control.Conn) error {
					if err := api.Events(ctx, args[0], last, false, print); err != nil {
						return err
					}
					st, err := api.State(ctx, args[0])
					if err == nil {
						status = st.Status
					}
					return err
				})
				if err == nil && status == statefmt.StatusRunning {
					// Nobody runs it any more: following would wait for nothing.
					w.Flush()
					return fmt.Errorf("the process running harness %s went away (killed, or the machine lost power) with the harness still running; its events above are all it wrote: `harness-edge resume %s` goes on from its last checkpoint", args[0], args[0])
				}
			}
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print each event as a JSON line")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until the harness completes or fails (needs a running owner to see new ones)")
	return c
}

func describe(e event.Event) string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	if e.To != "" {
		if e.From != "" {
			add("%s -> %s", e.From, e.To)
		} else {
			add("-> %s", e.To)
		}
	}
	if e.Phase != "" {
		add("phase %s", e.Phase)
	}
	switch {
	case e.GateID != "":
		add("%s", harness.DescribeGate(e.GateID, e.Kind, e.StepID))
	case e.StepID != "":
		add("step %s", e.StepID)
	}
	if e.Attempt > 0 {
		add("attempt %d", e.Attempt)
	}
	if e.SubAgentID != "" {
		add("sub-agent %s (%s) %s", e.SubAgentID, e.Agent, e.Outcome)
	}
	if e.Action != "" {
		add("%s", e.Action)
	}
	if e.Iteration > 0 {
		add("iteration %d", e.Iteration)
	}
	if e.Outcome != "" && e.SubAgentID == "" {
		add("%s", e.Outcome)
	}
	if e.ExitCode != nil {
		add("exit %d", *e.ExitCode)
	}
	if e.DelayMs > 0 {
		add("wait %.1fs", e.DelayMs/1000)
	}
	if e.WaitMs > 0 {
		add("waited %.1fs", e.WaitMs/1000)
	}
	switch {
	case e.Type == event.ToolCall:
		add("tool %s %.1f ms ok=%v", e.Tool, e.DurationMs, e.Success != nil && *e.Success)
	case e.Tool != "":
		add("tool %s", e.Tool)
	}
	if e.Usage != nil {
		add("%s", usageText(*e.Usage))
	}
	if e.Seq > 0 {
		add("seq %d %s %d B", e.Seq, e.Kind, e.StoredBytes)
	}
	if e.Steps > 0 {
		add("%s", plural(e.Steps, "step"))
	}
	if e.CPUMs > 0 || e.RSSBytes > 0 {
		add("cpu %.1f ms rss %s", e.CPUMs, sysinfo.FormatBytes(uint64(e.RSSBytes)))
	}
	if len(e.Blocked) > 0 {
		add("blocked %s", idlist.Join(e.Blocked, ","))
	}
	if e.By != "" {
		add("by %s", e.By)
	}
	if e.Reason != "" {
		add("(%s)", e.Reason)
	}
	if e.Message != "" {
		add("%s", e.Message)
	}
	return strings.Join(parts, "  ")
}

func newStopCmd(g *globals, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "stop ID",
		Short: "End a harness for good (completed if its plan is, failed otherwise), persisting its final state",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.do(func(api *control.Conn) error {
				status, err := api.Stop(context.Background(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "harness %s: %s\n", args[0], status)
				return nil
			})
		},
	}
}

// usageText is an agent's reported use in a few words: "3259 tokens, $0.0125".
func usageText(u event.Usage) string {
	s := plural(u.Tokens(), "token")
	if u.CostUSD > 0 {
		s += fmt.Sprintf(", $%.4f", u.CostUSD)
	}
	return s
}

// oneLine writes s on one line: line breaks as \n, so that a table keeps one row per item, and
// tabs as \t, which a table would take for the end of a cell (moving the columns of its other
// rows).
var oneLine = strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\r", `\r`, "\t", `\t`).Replace

// cellMax bounds what show and report print of one reason, result or error: a rejection's
// reason may be 64 KiB and a step's output a single line of megabytes, which would bury the
// rest. `show --json` and `report --json` have them whole.
const cellMax = 300

// clip is s as one line of a table or a message: cut to cellMax bytes (at a character's start),
// saying how long it is when cut, its line breaks and tabs escaped (oneLine).
func clip(s string) string { return clipOf(s, len(s)) }

// clipOf is clip of a part of a text of whole bytes (its first line): cut, it says the
// length of the whole text.
func clipOf(s string, whole int) string {
	if len(s) > cellMax {
		cut := cellMax
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = fmt.Sprintf("%s... (%d bytes in all)", s[:cut], whole)
	}
	return oneLine(s)
}
