package cli

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/bridge"
)

// VersionInfo is what `harness-edge version --json` prints.
type VersionInfo struct {
	Version  string           `json:"version"`
	Engine   EngineInfo       `json:"engine"`
	Arch     string           `json:"arch"`
	Go       string           `json:"go"`
	Warnings []bridge.Warning `json:"warnings,omitempty"`
}

// EngineInfo names the engine backend in use and its ABI version.
type EngineInfo struct {
	Backend    bridge.Backend `json:"backend"`
	ABIVersion uint32         `json:"abiVersion"`
}

func newVersionCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the engine backend in use, its ABI version and the architecture",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			e, warns := bridge.Load()
			info := VersionInfo{
				Version:  version,
				Engine:   EngineInfo{Backend: e.Backend(), ABIVersion: e.ABIVersion()},
				Arch:     bridge.Arch(),
				Go:       runtime.Version(),
				Warnings: warns,
			}
			if asJSON {
				return writeJSON(stdout, info)
			}
			fmt.Fprintf(stdout, "harness-edge %s\n", info.Version)
			fmt.Fprintf(stdout, "engine:  %s (ABI %d)\n", info.Engine.Backend, info.Engine.ABIVersion)
			fmt.Fprintf(stdout, "arch:    %s\n", info.Arch)
			fmt.Fprintf(stdout, "go:      %s\n", info.Go)
			for _, w := range warns {
				fmt.Fprintf(stdout, "warning: %s: %s\n", w.Code, w.Message)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}
