package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/inbox"
)

func newTellCmd(g *globals, stdin io.Reader, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "tell ID MESSAGE",
		Short: "Send a message to a harness's command agent: its next iteration's prompt carries it, once, as from the human",
		Long: `Send a message to the command agent of a harness (a Ralph loop): the prompt of the next
iteration that runs carries it, marked as a message from the human, exactly once. The message is
stored durably before tell returns, so it survives a crash of whatever runs the harness. MESSAGE
is the words after the id (- reads it from standard input; at most 64 KiB).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
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
			return fetchAndPrint(g, stdout, asJSON, func(ctx context.Context, api *control.Conn) (control.Told, error) {
				return api.Tell(ctx, args[0], text)
			}, func(told control.Told) error {
				fmt.Fprintf(stdout, "harness %s: message stored; the next iteration's prompt carries it\n", told.HarnessID)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the stored message as JSON")
	return c
}
