package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/statefmt"
)

// StateCheck is what `harness-edge state check --json` prints for a valid file.
type StateCheck struct {
	File              string          `json:"file"`
	FileSchemaVersion int             `json:"fileSchemaVersion"`
	SchemaVersion     int             `json:"schemaVersion"`
	HarnessID         string          `json:"harnessId"`
	AgentName         string          `json:"agentName"`
	Status            statefmt.Status `json:"status"`
	Steps             int             `json:"steps"`
	ToolCalls         int             `json:"toolCalls"`
	BinaryBytes       int             `json:"binaryBytes"`
}

func newStateCmd(stdin io.Reader, stdout io.Writer) *cobra.Command {
	state := &cobra.Command{
		Use:   "state",
		Short: "Work with HarnessState files (JSON v1)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	var asJSON bool
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a HarnessState JSON file (an export, or a hand-edited state); FILE - reads stdin",
		Long: `Reads a HarnessState JSON file of any supported schema version (older ones are migrated),
validates it, and prints its schemaVersion, harnessId, status, step count and tool-call count.
Exits 1 with the decoder's message (what, where, why) when the file is not a valid state.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			name := args[0]
			var data []byte
			var err error
			if name == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(name)
			}
			if err != nil {
				return err
			}
			if data, err = stateText(name, data); err != nil {
				return err
			}
			res, err := checkState(name, data)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if asJSON {
				return writeJSON(stdout, res)
			}
			migrated := ""
			if res.FileSchemaVersion != res.SchemaVersion {
				migrated = fmt.Sprintf(" (file has %d, migrated)", res.FileSchemaVersion)
			}
			fmt.Fprintf(stdout, "%s: valid HarnessState\n", name)
			fmt.Fprintf(stdout, "  schemaVersion  %d%s\n", res.SchemaVersion, migrated)
			fmt.Fprintf(stdout, "  harnessId      %s\n", res.HarnessID)
			fmt.Fprintf(stdout, "  agent          %s\n", res.AgentName)
			fmt.Fprintf(stdout, "  status         %s\n", res.Status)
			fmt.Fprintf(stdout, "  steps          %d\n", res.Steps)
			fmt.Fprintf(stdout, "  tool calls     %d\n", res.ToolCalls)
			fmt.Fprintf(stdout, "  binary size    %d bytes\n", res.BinaryBytes)
			return nil
		},
	}
	check.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	state.AddCommand(check)
	return state
}

func checkState(name string, data []byte) (*StateCheck, error) {
	fileVersion, err := statefmt.PeekSchemaVersion(data)
	if err != nil {
		return nil, err
	}
	s, err := statefmt.DecodeJSON(data)
	if err != nil {
		return nil, err
	}
	bin, err := statefmt.EncodeBinary(s)
	if err != nil {
		return nil, errors.Join(errors.New("valid JSON, but it has no canonical binary form"), err)
	}
	steps := 0
	if s.Plan != nil {
		steps = len(s.Plan.Steps)
	}
	return &StateCheck{File: name, FileSchemaVersion: fileVersion, SchemaVersion: s.SchemaVersion, HarnessID: s.HarnessID,
		AgentName: s.AgentName, Status: s.Status, Steps: steps, ToolCalls: len(s.ToolCallHistory), BinaryBytes: len(bin)}, nil
}
