package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/runtime/harness"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/sysinfo"
)

// do runs f with a connection to the store (control.Do): through the process that owns it,
// or on the store itself when none does.
func (g *globals) do(f func(*control.Conn) error) error {
	dir, err := g.storeDir()
	if err != nil {
		return err
	}
	return control.Do(dir, f)
}

// read is do for a command that only reads: a store no process owns is opened read-only
// (control.DoRead), so the command writes and syncs nothing.
func (g *globals) read(f func(*control.Conn) error) error {
	dir, err := g.storeDir()
	if err != nil {
		return err
	}
	return control.DoRead(dir, f)
}

func newServeCmd(g *globals, stdout, stderr io.Writer) *cobra.Command {
	var (
		httpAddr     string
		allowRemote  bool
		metricsPub   bool
		otlpEndpoint string
		concurrency  int
		dream        bool
		grace        time.Duration
		minMem       string
		maxLoad      float64
		maxTemp      float64
		governorPoll time.Duration
		logJSON      bool
		logEvents    bool
		retain       string
		natsURL      string
		natsCreds    string
		natsCA       string
		natsCert     string
		natsKey      string
		device       string
	)
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: own the store, resume interrupted harnesses, run submitted tasks, serve the control socket (and HTTP)",
		Long: `Run the daemon. It owns the store: on start it resumes every harness that was running when its
process died (and the ones a stopping daemon or a freeze put aside, and submitted ones not yet
started), then runs tasks handed to it with 'harness-edge submit' (or POST /v1/harnesses),
--concurrency at a time. Other harness-edge commands reach it through the control socket in the
store directory. SIGTERM or SIGINT pauses the running harnesses (reason "daemon shutdown",
resumed by the next daemon) and exits within --shutdown-timeout.

Dream Mode (--dream) auto-checkpoints every task's harness at its checkpoint.interval (scaled by
autonomy) even inside long steps. The resource governor holds each step back while available
memory, load per CPU or temperature is over its limit.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			dir, err := g.storeDir()
			if err != nil {
				return err
			}
			cfg := control.DaemonConfig{Dir: dir, HTTPAddr: httpAddr, AllowRemote: allowRemote, MetricsPublic: metricsPub, Concurrency: concurrency,
				Grace: grace, Version: version, Options: harness.Options{Dream: dream, GovernorPoll: governorPoll}, QuietEvents: !logEvents}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			if retain != "" {
				if cfg.Retain, err = control.ParseAge(retain); err != nil || cfg.Retain == 0 {
					return usageError{fmt.Errorf("--retain %q: want an age such as 30d, 2w or 36h", retain)}
				}
			}
			var limits sysinfo.Limits
			if minMem != "" {
				if limits.MinMemAvailable, err = sysinfo.ParseBytes(minMem); err != nil {
					return usageError{fmt.Errorf("--min-free-memory: %w", err)}
				}
			}
			limits.MaxLoadPerCPU, limits.MaxTempCelsius = maxLoad, maxTemp
			if limits != (sysinfo.Limits{}) {
				cfg.Options.Governor = &sysinfo.Governor{Limits: limits}
			}
			var h slog.Handler = slog.NewTextHandler(stderr, nil)
			if logJSON {
				h = slog.NewJSONHandler(stderr, nil)
			}
			cfg.Logger = slog.New(h)
			if err := fleetLink(&cfg, fleet.Options{URL: natsURL, Creds: natsCreds, CA: natsCA, Cert: natsCert, Key: natsKey}, device, cfg.Logger); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			sink, stopTracing, err := startTracing(ctx, otlpEndpoint, cfg.Logger)
			if err != nil {
				return usageError{err}
			}
			if sink != nil {
				cfg.Options.Sinks = append(cfg.Options.Sinks, sink)
				defer stopTracing()
			}
			return control.RunDaemon(ctx, cfg)
		},
	}
	f := c.Flags()
	f.StringVar(&httpAddr, "http", "", "also serve the HTTP API on ADDR (e.g. 127.0.0.1:8484); the bearer token is in http.token in the store directory")
	f.BoolVar(&allowRemote, "allow-remote", false, "allow --http on an address beyond loopback")
	f.StringVar(&otlpEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP to URL (e.g. http://127.0.0.1:4318); default: the standard OTEL_EXPORTER_OTLP_* variables, else no traces")
	f.BoolVar(&metricsPub, "metrics-public", false, "serve GET /metrics on --http without the token (the web console and the API still need it)")
	f.IntVar(&concurrency, "concurrency", 2, "harnesses to run at once")
	f.BoolVar(&dream, "dream", false, "Dream Mode for every task: auto-checkpoint at checkpoint.interval, inside long steps too")
	f.DurationVar(&grace, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long to wait for running harnesses to pause")
	f.StringVar(&minMem, "min-free-memory", "", "governor: start a step only with this much memory available (e.g. 256MB)")
	f.Float64Var(&maxLoad, "max-load", 0, "governor: start a step only while the 1-minute load per CPU is at most this (e.g. 1.5)")
	f.Float64Var(&maxTemp, "max-temp", 0, "governor: start a step only while every temperature sensor reads at most this many °C")
	f.DurationVar(&governorPoll, "governor-poll", 5*time.Second, "governor: how often to look again while waiting")
	f.StringVar(&retain, "retain", "", "retention: prune completed and failed harnesses that last changed longer ago than this (30d, 2w, 36h), on start and then regularly")
	f.BoolVar(&logJSON, "log-json", false, "log as JSON lines (default: text) on stderr")
	f.BoolVar(&logEvents, "log-events", true, "log every harness event; --log-events=false logs only warnings and failures (the event log in the store keeps every event)")
	f.StringVar(&natsURL, "nats", "", "join the fleet: replicate to JetStream at this NATS URL and answer its requests (docs/fleet.md)")
	f.StringVar(&natsCreds, "nats-creds", "", "NATS credentials file for --nats")
	addTLSFlags(f, &natsCA, &natsCert, &natsKey)
	f.StringVar(&device, "device", "", "this device's name in the fleet (default: the host name)")
	return c
}

func newSubmitCmd(g *globals, stdin io.Reader, stdout io.Writer) *cobra.Command {
	var (
		asJSON, loop bool
		lo           loopOptions
	)
	c := &cobra.Command{
		Use:   "submit TASK | submit --loop [loop flags] -- AGENT ARGS...",
		Short: "Hand a task file (or a Ralph loop, with --loop) to the daemon that owns the store; it runs it as a durable harness",
		Args: func(c *cobra.Command, args []string) error {
			if loop {
				return nil
			}
			if err := cobra.ExactArgs(1)(c, args); err != nil {
				return err
			}
			var loopOnly []string
			c.Flags().Visit(func(f *pflag.Flag) {
				if lf := c.Flags().Lookup(f.Name); lf != nil && lf.Annotations["loop"] != nil {
					loopOnly = append(loopOnly, "--"+f.Name)
				}
			})
			if len(loopOnly) > 0 {
				return usageError{fmt.Errorf("%s: only with --loop", strings.Join(loopOnly, ", "))}
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			var (
				data      []byte
				name, dir string
				err       error
			)
			if loop {
				if data, err = lo.taskFile(args, stdin); err != nil {
					return err
				}
				name = loopTaskName
				t, err := task.ParseAt(name, data, ".")
				if err != nil {
					return err
				}
				dir = t.Workspace.Path
			} else {
				// The size is checked here, as `run` checks it: a file over the limit is
				// refused before anything is sent.
				if data, err = task.ReadFile(args[0]); err != nil {
					return err
				}
				if dir, err = filepath.Abs(filepath.Dir(args[0])); err != nil {
					return err
				}
				name = args[0]
			}
			return g.do(func(api *control.Conn) error {
				id, err := api.Submit(context.Background(), control.Submission{Task: data, Name: name, Dir: dir})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(stdout, map[string]string{"id": id})
				}
				fmt.Fprintf(stdout, "submitted: harness %s (follow it with `harness-edge events %s --follow`)\n", id, id)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the harness id as JSON")
	c.Flags().BoolVar(&loop, "loop", false, "submit a Ralph loop around the agent command after -- (the flags of `harness-edge loop`)")
	lo.addFlags(c.Flags())
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "json" && f.Name != "loop" {
			_ = c.Flags().SetAnnotation(f.Name, "loop", []string{"true"})
		}
	})
	return c
}

func newPauseCmd(g *globals, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "pause ID",
		Short: "Pause a harness: a running one stops at once (its step in flight goes on from its last save on resume)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ctx := context.Background()
			if err := g.do(func(api *control.Conn) error { return api.Pause(ctx, args[0]) }); err != nil {
				return err
			}
			// A running harness pauses asynchronously: report what it came to. A foreground run
			// exits once paused, taking its socket along; the next look opens the store.
			var st *statefmt.HarnessState
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				err := g.do(func(api *control.Conn) (err error) {
					st, err = api.State(ctx, args[0])
					return err
				})
				if errors.Is(err, control.ErrOwnerGone) && time.Now().Before(deadline) {
					continue
				}
				if err != nil {
					return err
				}
				if st.Status != statefmt.StatusRunning || time.Now().After(deadline) {
					break
				}
			}
			fmt.Fprintf(stdout, "harness %s: %s\n", args[0], st.Status)
			return nil
		},
	}
}

func newFreezeCmd(g *globals, stdout io.Writer, freeze bool) *cobra.Command {
	var pause bool
	c := &cobra.Command{
		Use:   "freeze",
		Short: "Tell the daemon to start no new work (--pause: pause the running harnesses too); kept across restarts",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return g.do(func(api *control.Conn) error {
				ctx := context.Background()
				var err error
				if freeze {
					mode := control.FreezeContinue
					if pause {
						mode = control.FreezePause
					}
					err = api.Freeze(ctx, mode)
				} else {
					err = api.Unfreeze(ctx)
				}
				if err != nil {
					return err
				}
				h, err := api.Health(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "daemon (pid %d): frozen=%v, running %d, queued %d\n", h.PID, h.Frozen, len(h.Running), len(h.Queued))
				return nil
			})
		},
	}
	if freeze {
		c.Flags().BoolVar(&pause, "pause", false, "pause the running harnesses too (unfreeze resumes them)")
	} else {
		c.Use, c.Short = "unfreeze", "Let the daemon start work again, resuming the harnesses a freeze paused"
	}
	return c
}

func newReportCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	var since time.Duration
	c := &cobra.Command{
		Use:   "report",
		Short: "The morning report: what ran, completed, failed (and why), what waits for a human, checkpoints and bytes stored",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if since < 0 {
				return usageError{fmt.Errorf("--since %v: give a positive duration like 12h", since)}
			}
			// Not a one-shot read (oneShot): the report reads harness after harness, and with the
			// collector held off its memory would grow with the store, not with one harness.
			return printWith(g.read, stdout, asJSON, func(ctx context.Context, api *control.Conn) (*control.Report, error) {
				return api.Report(ctx, since)
			}, func(r *control.Report) error {
				printReport(stdout, r, since)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	c.Flags().DurationVar(&since, "since", 12*time.Hour, "the window: harnesses updated within it (0: all)")
	return c
}

func printReport(w io.Writer, r *control.Report, since time.Duration) { printReportOf(w, r, since, "") }

// printReportOf is printReport of a fleet device's replicated harnesses (device non-empty): the
// commands it names for a gate are the fleet's, which reach that device from here.
func printReportOf(w io.Writer, r *control.Report, since time.Duration, device string) {
	window := "all time"
	if since > 0 {
		window = fmt.Sprintf("the last %s (%s to %s)", shortDuration(since), r.Since.Local().Format("Jan 2 15:04"), r.Until.Local().Format("Jan 2 15:04"))
	}
	fmt.Fprintf(w, "harness-edge report: %s\n", window)
	var parts []string
	for _, s := range statefmt.Statuses {
		if n := r.Counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(parts) == 0 {
		parts = []string{"nothing ran"}
	}
	fmt.Fprintf(w, "  %s: %s; %s, %s stored", plural(len(r.Harnesses), "harness"), strings.Join(parts, ", "), plural(r.Checkpoints, "checkpoint"), sysinfo.FormatBytes(uint64(r.StoredBytes)))
	if r.CostUSD > 0 {
		fmt.Fprintf(w, "; agents report $%.4f spent", r.CostUSD)
	}
	fmt.Fprintln(w)
	if r.StoreBytes > 0 { // 0: not known here (the fleet's report, read from the hub)
		fmt.Fprintf(w, "  the store takes %s on disk (`harness-edge prune --older-than 30d` gives old harnesses' space back)\n", sysinfo.FormatBytes(r.StoreBytes))
	}
	tw := newColumns(w)
	for _, group := range []statefmt.Status{statefmt.StatusCompleted, statefmt.StatusFailed, statefmt.StatusPaused, statefmt.StatusRunning, statefmt.StatusCreated} {
		first := true
		for _, e := range r.Harnesses {
			if e.Status != group {
				continue
			}
			if first {
				fmt.Fprintf(tw, "\n%s\n", group)
				first = false
			}
			phase := ""
			if e.Phase != "" {
				phase = ", phase " + e.Phase
			}
			cost := ""
			switch {
			case e.BudgetUSD > 0:
				cost = fmt.Sprintf("\t$%.4f of $%.4f", e.CostUSD, e.BudgetUSD)
			case e.CostUSD > 0:
				cost = fmt.Sprintf("\t$%.4f", e.CostUSD)
			}
			fmt.Fprintf(tw, "  %s\t%s\tsteps %d/%d%s\t%s\t%s\t%s%s\tupdated %s\n", e.ID, e.Agent, e.StepsDone, e.Steps, phase,
				plural(e.ToolCalls, "tool call"), plural(e.Checkpoints, "checkpoint"), sysinfo.FormatBytes(uint64(e.StoredBytes)), cost, e.UpdatedAt.Local().Format("Jan 2 15:04"))
			reason := ""
			if group != statefmt.StatusCompleted {
				reason = e.Reason
			}
			if reason != "" {
				fmt.Fprintf(tw, "    %s\n", clip(reason))
			}
			// A failed harness's reason names its failed steps: those it showed whole are not
			// listed again.
			shownWhole := clip(reason) == oneLine(reason)
			for _, f := range e.Failures {
				if !shownWhole || !strings.Contains(reason, f) {
					fmt.Fprintf(tw, "    %s\n", resultCell(f))
				}
			}
		}
	}
	tw.Flush()
	if len(r.Damaged) > 0 {
		fmt.Fprintln(w, "\ndamaged (see `harness-edge verify`)")
		for _, d := range r.Damaged {
			fmt.Fprintf(w, "  %s: %s\n", d.ID, clip(d.Reason))
		}
	}
	if len(r.Waiting) > 0 {
		fmt.Fprintln(w, "\nwaiting for a human")
		cmd, id := "harness-edge", func(h string) string { return h }
		if device != "" {
			cmd, id = "harness-edge fleet", func(h string) string { return device + "/" + h }
		}
		for _, g := range r.Waiting {
			fmt.Fprintf(w, "  %s %s since %s: %s approve %s %s  |  %s reject %s %s --reason TEXT\n",
				g.HarnessID, harness.DescribeGate(g.Gate, g.Kind, g.StepID), g.Since.Local().Format("Jan 2 15:04"), cmd, id(g.HarnessID), g.Gate, cmd, id(g.HarnessID), g.Gate)
		}
	}
}

// shortDuration writes 12h for 12h0m0s and 1h30m for 1h30m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fetchAndPrint asks the store's owner (or the store itself) with get and prints the answer:
// as JSON with asJSON, else with text.
func fetchAndPrint[T any](g *globals, stdout io.Writer, asJSON bool, get func(context.Context, *control.Conn) (T, error), text func(T) error) error {
	return printWith(g.do, stdout, asJSON, get, text)
}

// readAndPrint is fetchAndPrint for a question that changes nothing (g.read).
func readAndPrint[T any](g *globals, stdout io.Writer, asJSON bool, get func(context.Context, *control.Conn) (T, error), text func(T) error) error {
	defer oneShot()()
	return printWith(g.read, stdout, asJSON, get, text)
}

func printWith[T any](do func(func(*control.Conn) error) error, stdout io.Writer, asJSON bool, get func(context.Context, *control.Conn) (T, error), text func(T) error) error {
	return do(func(api *control.Conn) error {
		v, err := get(context.Background(), api)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(stdout, v)
		}
		return text(v)
	})
}
