package docker

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	engine(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		NewDriver: func(t *testing.T) sandbox.Driver {
			return engine(t)
		},
		GuestBinary: realGuest(t),
		Limits:      true,
	})
}
