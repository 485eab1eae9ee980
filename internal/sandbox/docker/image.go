package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

var _ sandbox.ImageChecker = (*Driver)(nil)

// CheckImage reports whether image ("" = the driver's default) is in the
// engine's local image store; the driver never pulls.
func (d *Driver) CheckImage(ctx context.Context, image string) error {
	if image == "" {
		image = d.defaultImage
	}
	_, err := d.cli.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return unknownImage(image, err)
	}
	if err != nil {
		return fmt.Errorf("docker: check image %q: %w", image, d.unavailable(err))
	}
	return nil
}

func unknownImage(image string, cause error) error {
	return fmt.Errorf("%w %q: not in the local image store and the docker driver never pulls; build or load it first (test image: scripts/docker-image/build.sh): %v",
		sandbox.ErrUnknownImage, image, cause)
}
