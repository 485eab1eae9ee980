// Package docker is the sandbox driver on the Docker Engine API: one container
// per sandbox, with the agentkernel guest bind-mounted read-only as its
// entrypoint (PID 1), the workspace and the guest's socket directory
// bind-mounted from the host, the sandbox's secret on the guest's stdin, no
// network unless asked, and resource limits applied by Docker.
//
// Images are local only: the driver never pulls. The project's test image is
// built by scripts/docker-image/build.sh.
package docker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/moby/moby/client"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// Name is the driver's name in Handle.Driver and in configuration.
const Name = "docker"

// DefaultImage is the image used when neither the Spec nor New names one: the
// busybox image built by scripts/docker-image/build.sh.
const DefaultImage = "agentkernel/sandbox:busybox"

// Container labels. LabelManaged marks every container this driver created,
// so List finds them even when the store does not know them.
const (
	LabelSandbox = "agentkernel.sandbox"
	LabelManaged = "agentkernel.managed"
)

// Driver implements sandbox.Driver and sandbox.Lister on a Docker Engine.
type Driver struct {
	cli          *client.Client
	defaultImage string
	logger       *slog.Logger
}

var (
	_ sandbox.Driver = (*Driver)(nil)
	_ sandbox.Lister = (*Driver)(nil)
)

// New returns a driver talking to the engine that opts select; with no opts it
// follows DOCKER_HOST and friends (client.FromEnv), defaulting to
// unix:///var/run/docker.sock. defaultImage "" means DefaultImage. New does
// not contact the engine: call Check to learn whether it answers.
func New(defaultImage string, logger *slog.Logger, opts ...client.Opt) (*Driver, error) {
	if defaultImage == "" {
		defaultImage = DefaultImage
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(opts) == 0 {
		opts = []client.Opt{client.FromEnv}
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Driver{cli: cli, defaultImage: defaultImage, logger: logger.With("driver", Name)}, nil
}

// Name returns "docker".
func (d *Driver) Name() string { return Name }

// Close releases the client's connections. Containers keep running.
func (d *Driver) Close() error { return d.cli.Close() }

// Check pings the engine; it returns a *sandbox.UnavailableError saying what
// to do when dockerd does not answer.
func (d *Driver) Check(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return d.unavailable(err)
	}
	return nil
}
