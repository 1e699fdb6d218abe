package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/itlog"
)

func newLogsCmd(g *globals, stdout io.Writer) *cobra.Command {
	var q itlog.Query
	c := &cobra.Command{
		Use:   "logs ID",
		Short: "Print what a command agent's iteration printed (the newest, or --iteration N); --follow streams it as it runs",
		Long: `Print the live log of a command agent's iteration: what it wrote on stdout and stderr, as it
came, between a header and a trailer line. Without --iteration, the newest iteration's. With
--follow, go on printing as the agent prints, and on with the iterations that start after, until
the harness stops running. The logs are files under the store directory (logs/), bounded per
iteration (docs/agents.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if q.Iteration < 0 {
				return usageError{errors.New("--iteration: iterations count from 1")}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tr := &logTracker{w: stdout}
			err := g.read(func(api *control.Conn) error { return api.Logs(ctx, args[0], q, tr) })
			if errors.Is(err, control.ErrOwnerGone) && tr.iteration > 0 {
				// The owner ended while we printed (a foreground run finishing): nothing runs the
				// harness now, and the rest of its logs is in the store directory. Go on from
				// the iteration we were at, after what of it is printed.
				rest := itlog.Query{Iteration: tr.iteration, Follow: q.Follow}
				err = g.read(func(api *control.Conn) error {
					return api.Logs(ctx, args[0], rest, &skipWriter{w: stdout, skip: tr.n})
				})
			}
			if errors.Is(err, context.Canceled) {
				return nil // Ctrl-C
			}
			return err
		},
	}
	c.Flags().IntVar(&q.Iteration, "iteration", 0, "the iteration to print (default: the newest)")
	c.Flags().BoolVarP(&q.Follow, "follow", "f", false, "keep printing as the agent prints, and the iterations after, until the harness stops running")
	return c
}

// logTracker passes a log on and keeps track of the iteration it is at (from the logs' header
// lines) and how many bytes of that iteration's log it passed on.
type logTracker struct {
	w         io.Writer
	iteration int
	n         int64 // bytes of the iteration's log passed on
	lineStart int64 // n where the current line started
	line      []byte
}

func (t *logTracker) Write(p []byte) (int, error) {
	if _, err := t.w.Write(p); err != nil {
		return 0, err
	}
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		seg := rest
		if i >= 0 {
			seg = rest[:i+1]
		}
		rest = rest[len(seg):]
		t.n += int64(len(seg))
		if len(t.line) < 200 {
			t.line = append(t.line, seg[:min(len(seg), 200-len(t.line))]...)
		}
		if i < 0 {
			break
		}
		var n int
		var step string
		if _, err := fmt.Sscanf(string(t.line), "=== iteration %d of step %s started", &n, &step); err == nil && n > 0 && n != t.iteration {
			t.iteration, t.n = n, t.n-t.lineStart
		}
		t.line, t.lineStart = t.line[:0], t.n
	}
	return len(p), nil
}

// skipWriter drops the first skip bytes written to it.
type skipWriter struct {
	w    io.Writer
	skip int64
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.skip >= int64(n) {
		s.skip -= int64(n)
		return n, nil
	}
	p = p[s.skip:]
	s.skip = 0
	if _, err := s.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}
