// Command agentkernel is the agentkernel daemon and CLI in one binary.
package main

import (
	"context"
	"os"

	"github.com/agentkernel/agentkernel/internal/cli"
)

func main() {
	os.Exit(cli.NewMain().Run(context.Background(), os.Args[1:]))
}
