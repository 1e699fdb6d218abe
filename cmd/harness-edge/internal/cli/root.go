// Package cli is harness-edge's command line: it parses, calls the library, prints. Output is
// for people on a terminal and JSON with --json; exit codes are stable.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/control"
)

// version is set at link time by the Makefile (-X ...cli.version=...).
var version = "dev"

// Exit codes.
const (
	ExitOK      = 0
	ExitError   = 1
	ExitUsage   = 2
	ExitWaiting = 3
)

// EnvStore names the environment variable that sets the store directory.
const EnvStore = "HARNESS_EDGE_STORE"

// usageError marks a mistake in how the command was called (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// exitError carries a specific exit code with an already-printed outcome (with --json, that
// outcome is the JSON; no error object follows it).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }

type globals struct {
	store string
	json  bool
}

// Main runs the command line with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return MainWithInput(args, os.Stdin, stdout, stderr)
}

// MainWithInput is Main with an explicit standard input (for `state check -` in tests).
func MainWithInput(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{}
	tout, terr := &termWriter{w: stdout}, &termWriter{w: stderr}
	defer tout.Flush()
	defer terr.Flush()
	stdout, stderr = tout, terr
	root := newRoot(g, stdin, stdout, stderr)
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		// JSON and export's binary stream go out exact; everything else is for people.
		tout.raw = jsonRequested(cmd) || cmd.Name() == "export"
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stderr, "harness-edge: %v\n", err)
	var ue usageError
	var ee exitError
	code := ExitError
	switch {
	case errors.As(err, &ue), isCobraUsage(err):
		path := "harness-edge"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "see '%s --help' for usage\n", path)
		code = ExitUsage
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, control.ErrWaiting):
		code = ExitWaiting
	}
	if cmd != nil && jsonRequested(cmd) {
		// Whoever reads stdout as JSON gets the error as JSON too.
		b, _ := json.Marshal(struct {
			Type     string `json:"type"`
			Error    string `json:"error"`
			ExitCode int    `json:"exitCode"`
		}{"error", err.Error(), code})
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return code
}

// jsonRequested reports whether the command was given --json.
func jsonRequested(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

// isCobraUsage recognises the errors cobra itself returns for unknown commands and arguments.
func isCobraUsage(err error) bool {
	m := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}

func newRoot(g *globals, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "harness-edge",
		Short:         "A durable runtime for long-running AI-agent tasks on workstations and edge devices",
		SilenceUsage:  true,
		SilenceErrors: true,
		// No Args: cobra then refuses an unknown command itself, with "Did you mean this?".
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&g.store, "store", "", "store directory (default $"+EnvStore+", else $XDG_DATA_HOME/harness-edge, else ~/.local/share/harness-edge)")
	root.AddCommand(newVersionCmd(g, stdout), newDoctorCmd(g, stdout), newStateCmd(stdin, stdout),
		newLsCmd(g, stdout), newInspectCmd(g, stdout), newVerifyCmd(g, stdout), newExportCmd(g, stdout), newImportCmd(g, stdin, stdout),
		newRunCmd(g, stdout), newResumeCmd(g, stdout), newShowCmd(g, stdout), newEventsCmd(g, stdout), newStopCmd(g, stdout),
		newDecideCmd(g, stdout, true), newDecideCmd(g, stdout, false),
		newServeCmd(g, stdout, stderr), newSubmitCmd(g, stdin, stdout), newLoopCmd(g, stdin, stdout), newLogsCmd(g, stdout), newTellCmd(g, stdin, stdout), newPauseCmd(g, stdout), newReportCmd(g, stdout), newMetricsCmd(g, stdout),
		newFreezeCmd(g, stdout, true), newFreezeCmd(g, stdout, false), newBenchCmd(g, stdout, stderr),
		newRetryCmd(g, stdout), newDeleteCmd(g, stdout), newPruneCmd(g, stdout),
		newPlanCmd(g, stdout), newReplanCmd(g, stdin, stdout),
		newCheckpointCmd(g, stdout), newCheckpointsCmd(g, stdout), newRollbackCmd(g, stdout),
		newHubCmd(g, stdout, stderr), newFleetCmd(g, stdin, stdout))
	return root
}

// storeDir resolves the store directory: --store, then $HARNESS_EDGE_STORE, then
// $XDG_DATA_HOME/harness-edge, then ~/.local/share/harness-edge.
func (g *globals) storeDir() (string, error) {
	if g.store != "" {
		return filepath.Abs(g.store)
	}
	if d := os.Getenv(EnvStore); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "harness-edge"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the store directory: no --store, $%s, $XDG_DATA_HOME or home directory: %w", EnvStore, err)
	}
	return filepath.Join(home, ".local", "share", "harness-edge"), nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
