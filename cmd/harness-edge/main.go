// Command harness-edge is the durable runtime for long-running agent tasks. This file only
// hands over to internal/cli; see README.md for the commands.
package main

import (
	"fmt"
	"os"

	"github.com/harness-edge/harness-edge/cmd/harness-edge/internal/cli"
	"github.com/harness-edge/harness-edge/runtime/proc"
)

func main() {
	// Before anything runs a tool: the tools must not read this process's environment (API
	// keys) through /proc.
	if err := proc.HideEnviron(); err != nil {
		fmt.Fprintf(os.Stderr, "harness-edge: warning: cannot hide the environment from tools: %v\n", err)
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
