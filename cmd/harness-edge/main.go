// Command harness-edge is the durable runtime for long-running agent tasks. This file only
// hands over to internal/cli; see README.md for the commands.
package main

import (
	"os"

	"github.com/harness-edge/harness-edge/cmd/harness-edge/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
