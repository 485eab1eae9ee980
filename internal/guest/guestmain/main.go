// Command guestmain is a stand-alone build of the guest for tests that must
// not depend on cmd/agentkernel (sandboxtest builds it with CGO_ENABLED=0).
// It accepts an optional leading "guest" so it can stand in for
// `agentkernel guest`.
package main

import (
	"context"
	"os"

	"github.com/agentkernel/agentkernel/internal/guest"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "guest" {
		args = args[1:]
	}
	os.Exit(guest.Main(context.Background(), args))
}
