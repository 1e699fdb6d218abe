package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
)

// EnvNATS names the environment variable that gives fleet commands their NATS URL.
const EnvNATS = "HARNESS_EDGE_NATS"

// fleetLink joins `serve` to the fleet when --nats is given: the replicator becomes one of the
// daemon's event sinks and the link runs beside its scheduler.
func fleetLink(cfg *control.DaemonConfig, nopts fleet.Options, device string, log *slog.Logger) error {
	if nopts.URL == "" {
		if nopts.Creds != "" || nopts.CA != "" || nopts.Cert != "" || nopts.Key != "" || device != "" {
			return usageError{errors.New("--nats-creds, --nats-ca, --nats-cert, --nats-key and --device need --nats URL")}
		}
		return nil
	}
	if err := nopts.Check(); err != nil {
		return usageError{err}
	}
	if device == "" {
		device = fleet.DefaultDevice()
	}
	if err := fleet.ValidDevice(device); err != nil {
		return usageError{fmt.Errorf("--device: %w", err)}
	}
	l, err := fleet.NewLink(fleet.LinkConfig{NATS: nopts, Device: device, Version: version, Log: log})
	if err != nil {
		return err
	}
	l.Join(cfg)
	return nil
}

func newHubCmd(g *globals, stdout, stderr io.Writer) *cobra.Command {
	var listen string
	var allowRemote bool
	c := &cobra.Command{
		Use:   "hub",
		Short: "Run a fleet hub: an embedded NATS server with JetStream on disk that devices replicate to",
		Long: `Run a fleet hub: an embedded NATS server with JetStream, its files in the store directory
(DIR/jetstream), and the fleet's streams. Devices join it with 'harness-edge serve --nats URL';
'harness-edge fleet ls|show|events|report|approve|reject|pause|resume|tell|adopt --nats URL' read and answer the fleet from any machine
that reaches it. It listens on loopback unless --allow-remote is given; see docs/fleet.md for the
permissions a larger fleet on its own NATS cluster needs. SIGTERM or SIGINT stops it.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			dir, err := g.storeDir()
			if err != nil {
				return err
			}
			if err := control.CheckBind(listen, allowRemote); err != nil {
				return usageError{fmt.Errorf("--listen: %w", err)}
			}
			h, err := fleet.StartHub(fleet.HubConfig{Dir: dir, Listen: listen, AllowRemote: allowRemote})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "hub listening on %s (JetStream in %s/jetstream)\n", h.URL(), dir)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			<-ctx.Done()
			h.Shutdown()
			fmt.Fprintln(stderr, "hub stopped")
			return nil
		},
	}
	c.Flags().StringVar(&listen, "listen", fleet.DefaultListen, "host:port for NATS clients (port 0: any free port)")
	c.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow --listen on an address beyond loopback")
	return c
}

// addTLSFlags adds the flags for TLS to NATS.
func addTLSFlags(f *pflag.FlagSet, ca, cert, key *string) {
	f.StringVar(ca, "nats-ca", "", "PEM file of the CA that signs the NATS server's certificate (turns TLS on; default: the system's CAs for a tls:// URL)")
	f.StringVar(cert, "nats-cert", "", "PEM client certificate for a NATS server that verifies clients (with --nats-key)")
	f.StringVar(key, "nats-key", "", "PEM private key of --nats-cert")
}

// fleetFlags are the flags every fleet command takes.
type fleetFlags struct {
	url, creds, ca, cert, key string
	timeout                   time.Duration
	// refused is the first refusal of a publish or subscription on the session's connection;
	// it ends the session at once (cancel).
	mu      sync.Mutex
	refused error
	cancel  context.CancelFunc
}

// explain turns a command's error into the server's refusal when there was one: without it a
// refused request would read as a device that does not answer.
func (f *fleetFlags) explain(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil || f.refused == nil {
		return err
	}
	who := "this connection's NATS user"
	if f.creds != "" {
		who = "the NATS user of --nats-creds " + f.creds
	}
	return fmt.Errorf("NATS refused it: %w (%s may not do this: see the permissions in docs/fleet.md, \"Security\")", f.refused, who)
}

func (f *fleetFlags) onRefused(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused == nil {
		f.refused = err
	}
	if f.cancel != nil {
		f.cancel()
	}
}

func (f *fleetFlags) add(c *cobra.Command) {
	c.PersistentFlags().StringVar(&f.url, "nats", "", "NATS URL of the fleet (default $"+EnvNATS+", else nats://127.0.0.1:4222)")
	c.PersistentFlags().StringVar(&f.creds, "nats-creds", "", "NATS credentials file")
	addTLSFlags(c.PersistentFlags(), &f.ca, &f.cert, &f.key)
	c.PersistentFlags().DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for NATS (and for a device's answer)")
}

// session connects to NATS and bounds the command by --timeout; done lets both go.
func (f *fleetFlags) session() (ctx context.Context, js jetstream.JetStream, done func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	js, closeNC, err := f.connect()
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, js, func() { cancel(); closeNC() }, nil
}

func (f *fleetFlags) connect() (jetstream.JetStream, func(), error) {
	url := f.url
	if url == "" {
		url = os.Getenv(EnvNATS)
	}
	if url == "" {
		url = "nats://" + fleet.DefaultListen
	}
	o := fleet.Options{URL: url, Creds: f.creds, CA: f.ca, Cert: f.cert, Key: f.key, Name: "harness-edge fleet", Refused: f.onRefused}
	if err := o.Check(); err != nil {
		return nil, nil, usageError{err}
	}
	nc, err := fleet.Connect(o, false)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// deviceHarness splits DEVICE/ID.
func deviceHarness(arg string) (string, string, error) {
	dev, id, ok := strings.Cut(arg, "/")
	if !ok || dev == "" || id == "" {
		return "", "", usageError{fmt.Errorf("%q: name a harness as DEVICE/ID (see `harness-edge fleet ls`)", arg)}
	}
	if err := fleet.ValidDevice(dev); err != nil {
		return "", "", usageError{err}
	}
	return dev, id, nil
}

func newFleetCmd(g *globals, stdin io.Reader, stdout io.Writer) *cobra.Command {
	var ff fleetFlags
	c := &cobra.Command{
		Use:   "fleet",
		Short: "The fleet on NATS JetStream: every device's harnesses in one view (ls, show, events, report), gates answered and harnesses steered from anywhere (approve, reject, pause, resume, tell), a lost device's harness moved to another (adopt)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	ff.add(c)
	c.AddCommand(newFleetLsCmd(&ff, stdout), newFleetShowCmd(&ff, stdout), newFleetDecideCmd(&ff, stdout, true), newFleetDecideCmd(&ff, stdout, false), newFleetAdoptCmd(&ff, stdout),
		newFleetEventsCmd(&ff, stdout), newFleetReportCmd(&ff, stdout),
		newFleetControlCmd(&ff, stdin, stdout, fleet.OpPause), newFleetControlCmd(&ff, stdin, stdout, fleet.OpResume), newFleetControlCmd(&ff, stdin, stdout, fleet.OpTell))
	for _, sub := range c.Commands() {
		if run := sub.RunE; run != nil {
			sub.RunE = func(c *cobra.Command, args []string) error { return ff.explain(run(c, args)) }
		}
	}
	return c
}

func newFleetLsCmd(ff *fleetFlags, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls",
		Short: "Every device and every harness of the fleet, with its replicated state and replication lag",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, js, done, err := ff.session()
			if err != nil {
				return err
			}
			defer done()
			f, err := fleet.List(ctx, js)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, f)
			}
			tw := newColumns(stdout)
			fmt.Fprintln(tw, "DEVICE\tLAST SEEN\tHARNESSES\tBACKLOG\tRELEASED")
			for _, d := range f.Devices {
				fmt.Fprintf(tw, "%s\t%s ago\t%d\t%d\t%d\n", d.Name, d.SeenAgo.Round(time.Second), d.Heartbeat.Harnesses, d.Heartbeat.Backlog, d.Heartbeat.Released)
			}
			fmt.Fprintln(tw, "\nDEVICE/ID\tAGENT\tSTATUS\tPARENT\tCHECKPOINTS\tUPDATED\tLAG")
			for _, h := range f.Harnesses {
				e := h.Entry
				parent := e.ParentHarnessID
				if parent == "" {
					parent = "-"
				}
				fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%d\t%s\t%s\n", h.Device, e.ID, e.AgentName, e.Status, parent, e.HeadSeq,
					e.UpdatedAt.Format("2006-01-02 15:04:05Z07:00"), h.Lag.Round(time.Millisecond))
			}
			for _, u := range f.Unreadable {
				fmt.Fprintf(tw, "unreadable: %s\n", u.Error)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

func newFleetShowCmd(ff *fleetFlags, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show DEVICE/ID",
		Short: "A device's harness rebuilt from its replicated records, every hash checked (--json: HarnessState JSON v1)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dev, id, err := deviceHarness(args[0])
			if err != nil {
				return err
			}
			ctx, js, done, err := ff.session()
			if err != nil {
				return err
			}
			defer done()
			s, err := fleet.Show(ctx, js, nil, dev, id)
			if err != nil {
				return err
			}
			if asJSON {
				b, err := statefmt.EncodeJSON(s.State)
				if err != nil {
					return err
				}
				_, err = stdout.Write(append(b, '\n'))
				return err
			}
			fmt.Fprintf(stdout, "device   %s (replicated %s, %s; records %d-%d replayed and verified; lag %s)\n",
				dev, plural(s.Records, "record"), plural(s.Events, "event"), s.Entry.KeyframeSeq, s.Entry.HeadSeq, s.Lag.Round(time.Millisecond))
			printState(stdout, s.State)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the HarnessState as JSON v1")
	return c
}

func newFleetDecideCmd(ff *fleetFlags, stdout io.Writer, approve bool) *cobra.Command {
	var reason, requestID string
	var asJSON bool
	c := &cobra.Command{
		Use:   "approve DEVICE/ID [GATE]",
		Short: "Approve a gate of a device's harness over NATS; the device applies it once, then resumes the harness",
		Long: `Approve a pending human gate of a harness on another device. The request goes to the device's
daemon over NATS (request/reply), which applies it through its own approve path, durably, and
answers with the result. A request is sent again while no answer comes (until --timeout); the
device applies it once however often it arrives. To retry by hand after a timeout, give the
same --request-id.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(_ *cobra.Command, args []string) error {
			if !approve && strings.TrimSpace(reason) == "" {
				return usageError{errors.New("reject needs --reason TEXT: say why, for whoever replans")}
			}
			dev, id, err := deviceHarness(args[0])
			if err != nil {
				return err
			}
			gate := ""
			if len(args) == 2 {
				gate = args[1]
			}
			if requestID == "" {
				requestID = fleet.NewRequestID()
			}
			ctx, js, done, err := ff.session()
			if err != nil {
				return err
			}
			defer done()
			rep, err := fleet.Decide(ctx, js.Conn(), dev, fleet.Request{ID: requestID, Harness: id, Gate: gate, Approve: approve, Reason: reason}, 2*time.Second)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, rep)
			}
			d := rep.Decision
			again := ""
			if rep.Repeated {
				again = " (this request was applied before; nothing changed now)"
			}
			switch {
			case approve && d.Resumed:
				fmt.Fprintf(stdout, "%s/%s: %s approved; the device's daemon resumes it%s\n", dev, d.HarnessID, harness.DescribeGate(d.Gate.ID, d.Gate.Kind, d.Gate.StepID), again)
			case approve:
				fmt.Fprintf(stdout, "%s/%s: %s approved%s\n", dev, d.HarnessID, harness.DescribeGate(d.Gate.ID, d.Gate.Kind, d.Gate.StepID), again)
			default:
				fmt.Fprintf(stdout, "%s/%s: %s rejected: %s%s\n", dev, d.HarnessID, harness.DescribeGate(d.Gate.ID, d.Gate.Kind, d.Gate.StepID), clip(reason), again)
			}
			return nil
		},
	}
	c.Flags().StringVar(&requestID, "request-id", "", "the request's id (default: a new random one); the same id is applied once")
	c.Flags().BoolVar(&asJSON, "json", false, "print the device's answer as JSON")
	if !approve {
		c.Use = "reject DEVICE/ID [GATE] --reason TEXT"
		c.Short = "Reject a gate of a device's harness over NATS with a reason; the device applies it once"
		c.Long = ""
		c.Flags().StringVar(&reason, "reason", "", "why the gate is rejected (required)")
	}
	return c
}

// LiveWithin is how recent a device's heartbeat must be for `fleet adopt` without --to to count
// it as up (three heartbeat periods).
const LiveWithin = 3 * fleet.HeartbeatEvery

func newFleetAdoptCmd(ff *fleetFlags, stdout io.Writer) *cobra.Command {
	var to, requestID string
	var asJSON bool
	c := &cobra.Command{
		Use:   "adopt DEVICE/ID [--to DEVICE2]",
		Short: "Move a harness of a device that is down to another device: rebuilt there from the hub, every hash checked, and resumed",
		Long: `Adopt a harness of a device that is down (or cut off) on another device. The request goes to
DEVICE2's daemon over NATS, which rebuilds the harness from the records, task and events DEVICE
replicated, replaying its chain hash by hash as an import does, makes itself the harness's owner
in the fleet's fence (a compare-and-set on the harness's entry), stores it and resumes it, and
answers with the result. Its sub-agents (and theirs) move with it, in the same checks and the
same batch; the fence entry is the harness's, and covers them. DEVICE's daemon, when it comes
back, does not run the harness (nor, so, its sub-agents): it pauses it, saying which device
adopted it.

Refused, changing nothing: while DEVICE's daemon answers on NATS, when the fence already names
another device, when the replicated records do not verify, when DEVICE2 holds a harness of that
id, for a harness that completed or failed, and for a sub-agent on its own (adopt its parent). Without --to, the target is the one device other
than DEVICE whose heartbeat is less than 15 s old; with none or several, name it. A request is
sent again while no answer comes (until --timeout), and applied once; to retry by hand, give the
same --request-id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dev, id, err := deviceHarness(args[0])
			if err != nil {
				return err
			}
			if to != "" {
				if err := fleet.ValidDevice(to); err != nil {
					return usageError{fmt.Errorf("--to: %w", err)}
				}
				if to == dev {
					return usageError{fmt.Errorf("--to %s: the harness is on %s already; name another device", to, dev)}
				}
			}
			if requestID == "" {
				requestID = fleet.NewRequestID()
			}
			ctx, js, done, err := ff.session()
			if err != nil {
				return err
			}
			defer done()
			if to == "" {
				f, err := fleet.List(ctx, js)
				if err != nil {
					return err
				}
				var up []string
				for _, d := range f.Devices {
					if d.Name != dev && d.SeenAgo < LiveWithin {
						up = append(up, d.Name)
					}
				}
				if len(up) != 1 {
					return usageError{fmt.Errorf("name the device to adopt %s on with --to: %d devices other than %s are up (heartbeat within %v): %s",
						args[0], len(up), dev, LiveWithin, strings.Join(append(up, "none")[:max(1, len(up))], ", "))}
				}
				to = up[0]
			}
			rep, err := fleet.Decide(ctx, js.Conn(), to, fleet.Request{ID: requestID, Op: fleet.OpAdopt, From: dev, Harness: id}, 5*time.Second)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, rep)
			}
			a := rep.Adopted
			if a == nil {
				return fmt.Errorf("device %s answered without an adoption", to)
			}
			again := ""
			if rep.Repeated {
				again = " (this request was applied before; nothing changed now)"
			}
			fmt.Fprintf(stdout, "%s/%s adopted by %s: records %d-%d verified (%d), %s, fence revision %d%s\n",
				dev, a.Harness, a.To, a.HeadSeq-uint64(max(a.Records, 1))+1, a.HeadSeq, a.Records, plural(a.Events, "event"), a.FenceRevision, again)
			if len(a.Harnesses) > 1 {
				fmt.Fprintf(stdout, "%s/%s: its sub-agents moved with it: %s\n", a.To, a.Harness, idlist.Join(a.Harnesses[1:], ", "))
			}
			switch {
			case a.Resumed:
				fmt.Fprintf(stdout, "%s/%s: the daemon resumes it\n", a.To, a.Harness)
			case len(a.Waiting) > 0:
				fmt.Fprintf(stdout, "%s/%s: waits on gate(s) %s (approve with `harness-edge fleet approve %s/%s`)\n", a.To, a.Harness, idlist.Join(a.Waiting, ", "), a.To, a.Harness)
			case a.ResumeError != "":
				fmt.Fprintf(stdout, "%s/%s: stored, not resumed: %s\n", a.To, a.Harness, a.ResumeError)
			}
			return nil
		},
	}
	c.Flags().StringVar(&to, "to", "", "the device that takes the harness (default: the only other device that is up)")
	c.Flags().StringVar(&requestID, "request-id", "", "the request's id (default: a new random one); the same id is applied once")
	c.Flags().BoolVar(&asJSON, "json", false, "print the device's answer as JSON")
	return c
}
