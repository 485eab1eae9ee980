package guest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AgentSocketEnv overrides the socket the agent CLI posts to.
const AgentSocketEnv = "AGENTKERNEL_AGENT_SOCKET"

// AgentMain is the agent-side CLI inside a sandbox (`agentkernel agent …`,
// also built alone as cmd/agentkernel-agent):
//
//	agent heartbeat STATUS [--data JSON]
//	agent event TYPE [--status S] [--data JSON]
//
// It posts to the guest's agent socket (/run/agentkernel/agent.sock, or
// $AGENTKERNEL_AGENT_SOCKET), which takes agent events and nothing else,
// and returns the process exit code: 0 when the guest accepted the event,
// 2 for usage errors, 1 otherwise.
func AgentMain(ctx context.Context, args []string, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintf(stderr, "usage:\n  agent heartbeat idle|running|degraded|failed [--data JSON]\n  agent event TYPE [--status S] [--data JSON]\n\nwork event types: %s\nnon-work event types: %s\n",
			strings.Join(store.WorkEventTypes(), ", "), strings.Join(store.NonWorkEventTypes(), ", "))
		return 2
	}
	if len(args) < 2 {
		return usage()
	}
	var ev AgentEvent
	switch args[0] {
	case "heartbeat":
		ev = AgentEvent{Type: store.EventHeartbeat, Status: args[1]}
	case "event":
		ev = AgentEvent{Type: args[1]}
	default:
		return usage()
	}
	fs := flag.NewFlagSet("agent "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "event data as a JSON object")
	status := fs.String("status", "", "heartbeat status (agent.heartbeat only)")
	if err := fs.Parse(args[2:]); err != nil {
		return 2
	}
	if *status != "" {
		ev.Status = *status
	}
	if *data != "" {
		if !json.Valid([]byte(*data)) {
			fmt.Fprintf(stderr, "agent: --data is not valid JSON: %s\n", *data)
			return 2
		}
		ev.Data = json.RawMessage(*data)
	}
	if err := ev.validate(); err != nil {
		fmt.Fprintf(stderr, "agent: %v\n", err)
		return 2
	}
	socket := os.Getenv(AgentSocketEnv)
	if socket == "" {
		socket = DefaultAgentSocketPath
	}
	c := NewAgentClient(socket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.PostAgentEvents(ctx, []AgentEvent{ev}); err != nil {
		fmt.Fprintf(stderr, "agent: %v\n", err)
		return 1
	}
	return 0
}
