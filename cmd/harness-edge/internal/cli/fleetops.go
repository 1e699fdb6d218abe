package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/runtime/inbox"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// printEvent prints an event as `harness-edge events` does.
func printEvent(w io.Writer, e event.Event, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	fmt.Fprintf(w, "%5d  %s  %-16s %s\n", e.N, e.Time.Format("15:04:05.000"), e.Type, oneLine(describe(e)))
}

func newFleetEventsCmd(ff *fleetFlags, stdout io.Writer) *cobra.Command {
	var asJSON, follow bool
	c := &cobra.Command{
		Use:   "events DEVICE/ID",
		Short: "A device's harness's event log as replicated: the lines `harness-edge events` prints on the device (--follow: and new ones until interrupted)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dev, id, err := deviceHarness(args[0])
			if err != nil {
				return err
			}
			js, closeNC, err := ff.connect()
			if err != nil {
				return err
			}
			defer closeNC()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if !follow {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, ff.timeout)
				defer cancel()
			}
			return fleet.Events(ctx, js, dev, id, follow, func(e event.Event) error {
				printEvent(stdout, e, asJSON)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print each event as a JSON line")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing the events the device replicates next, until interrupted")
	return c
}

func newFleetReportCmd(ff *fleetFlags, stdout io.Writer) *cobra.Command {
	var asJSON bool
	var since time.Duration
	c := &cobra.Command{
		Use:   "report",
		Short: "The morning report across the fleet: per device, its heartbeat and replication lag, and `harness-edge report` built from its replicated harnesses",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if since < 0 {
				return usageError{fmt.Errorf("--since %v: give a positive duration like 12h", since)}
			}
			ctx, js, done, err := ff.session()
			if err != nil {
				return err
			}
			defer done()
			r, err := fleet.BuildReport(ctx, js, nil, since)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, r)
			}
			for i, d := range r.Devices {
				if i > 0 {
					fmt.Fprintln(stdout)
				}
				seen := "no heartbeat on the hub"
				if d.Heartbeat != nil {
					seen = fmt.Sprintf("last heartbeat %s ago, %d records not yet replicated then", d.SeenAgo.Round(time.Second), d.Heartbeat.Backlog)
					if d.Heartbeat.Released > 0 {
						seen += fmt.Sprintf(", %d released before they were sent (their intermediate states are not on the hub)", d.Heartbeat.Released)
					}
				}
				fmt.Fprintf(stdout, "device %s: %s; replication lag up to %s\n", d.Device, seen, d.MaxLag.Round(time.Millisecond))
				printReportOf(stdout, d.Report, since, d.Device)
			}
			if len(r.Devices) == 0 {
				fmt.Fprintln(stdout, "no device has replicated to this hub yet")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	c.Flags().DurationVar(&since, "since", 12*time.Hour, "the window: harnesses updated within it (0: all)")
	return c
}

// newFleetControlCmd makes `fleet pause`, `fleet resume` and `fleet tell`: requests to the
// device's daemon over NATS, applied once through its own pause, resume and tell.
func newFleetControlCmd(ff *fleetFlags, stdin io.Reader, stdout io.Writer, op string) *cobra.Command {
	var requestID string
	var asJSON bool
	c := &cobra.Command{
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dev, id, err := deviceHarness(args[0])
			if err != nil {
				return err
			}
			req := fleet.Request{ID: requestID, Op: op, Harness: id}
			if op == fleet.OpTell {
				text := strings.Join(args[1:], " ")
				if text == "-" {
					b, err := io.ReadAll(io.LimitReader(stdin, inbox.MaxBytes+1))
					if err != nil {
						return fmt.Errorf("standard input: %w", err)
					}
					text = string(b)
				}
				if err := inbox.Check(text); err != nil {
					return usageError{errors.New("MESSAGE: " + err.Error())}
				}
				req.Message = text
			}
			if req.ID == "" {
				req.ID = fleet.NewRequestID()
			}
			ctx, js, done, err := ff.session()
			if err != nil {
				return err
			}
			defer done()
			// A pause waits on the device for a running step to come to rest (10 s at most).
			rep, err := fleet.Decide(ctx, js.Conn(), dev, req, 15*time.Second)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, rep)
			}
			again := ""
			if rep.Repeated {
				again = " (this request was applied before; nothing changed now)"
			}
			switch op {
			case fleet.OpTell:
				fmt.Fprintf(stdout, "%s/%s: message stored; the next iteration's prompt carries it%s\n", dev, id, again)
			case fleet.OpResume:
				fmt.Fprintf(stdout, "%s/%s: queued in the device's daemon; follow it with `harness-edge fleet events %s/%s --follow`%s\n", dev, id, dev, id, again)
			default:
				fmt.Fprintf(stdout, "%s/%s: %s%s\n", dev, id, rep.Status, again)
			}
			return nil
		},
	}
	switch op {
	case fleet.OpPause:
		c.Use = "pause DEVICE/ID"
		c.Short = "Pause a device's harness over NATS, as `harness-edge pause` on the device; applied once"
	case fleet.OpResume:
		c.Use = "resume DEVICE/ID"
		c.Short = "Resume a device's paused harness over NATS in its daemon, as `harness-edge resume` on the device; applied once"
	case fleet.OpTell:
		c.Use = "tell DEVICE/ID MESSAGE"
		c.Short = "Send a message to a device's loop harness over NATS, as `harness-edge tell` on the device; stored once"
		c.Args = cobra.MinimumNArgs(2)
	}
	c.Long = c.Short + `.

The request goes to the device's daemon over NATS (request/reply), which applies it through the
same path as the command on the device, and answers with the result: the same errors, and the
same exit codes. A request is sent again while no answer comes (until --timeout); the device
applies it once however often it arrives. To retry by hand after a timeout, give the same
--request-id.`
	c.Flags().StringVar(&requestID, "request-id", "", "the request's id (default: a new random one); the same id is applied once")
	c.Flags().BoolVar(&asJSON, "json", false, "print the device's answer as JSON")
	return c
}
