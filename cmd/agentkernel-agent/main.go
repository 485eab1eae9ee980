// Command agentkernel-agent is the tiny CLI an agent runs inside its
// sandbox to report heartbeats and events to the guest:
//
//	agentkernel-agent heartbeat running
//	agentkernel-agent event agent.tool_use --data '{"tool":"bash"}'
//
// The same CLI is `agentkernel agent …` (the guest binary at
// /.agentkernel/guest inside every sandbox). Build it static:
// CGO_ENABLED=0 go build ./cmd/agentkernel-agent.
package main

import (
	"context"
	"os"

	"github.com/agentkernel/agentkernel/internal/guest"
)

func main() {
	os.Exit(guest.AgentMain(context.Background(), os.Args[1:], os.Stderr))
}
