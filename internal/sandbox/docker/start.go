package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// Start creates and starts the sandbox's container and returns once its PID 1
// (the guest) has been started; the caller probes the guest for readiness.
func (d *Driver) Start(ctx context.Context, spec sandbox.Spec) (*sandbox.Handle, error) {
	image := spec.Image
	if image == "" {
		image = d.defaultImage
	}
	opts, err := buildCreate(spec, image)
	if err != nil {
		return nil, fmt.Errorf("docker: start %s: %w", spec.ID, err)
	}
	// Docker would bind-mount a directory here just as happily and then fail
	// with an obscure exec error; say what is wrong instead.
	if fi, err := os.Stat(spec.GuestBinary); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("docker: start %s: spec.GuestBinary %q: not a regular file (build the guest with CGO_ENABLED=0)", spec.ID, spec.GuestBinary)
	}

	if len(spec.Secret) != guest.SecretSize {
		return nil, fmt.Errorf("docker: start %s: spec.Secret is %d bytes, want %d", spec.ID, len(spec.Secret), guest.SecretSize)
	}
	// The shared socket directory starts empty, whatever an earlier
	// instance put there.
	sockDir := filepath.Join(spec.RunDir, sockDirName)
	if err := os.RemoveAll(sockDir); err != nil {
		return nil, fmt.Errorf("docker: start %s: %w", spec.ID, err)
	}
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("docker: start %s: %w", spec.ID, err)
	}

	id, err := d.create(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("docker: start %s: %w", spec.ID, err)
	}
	pid, err := d.startWithSecret(ctx, id, spec.Secret)
	if err != nil {
		// Do not leave a created-but-dead container behind for List to find;
		// the cleanup must finish even if ctx is what failed.
		d.remove(context.WithoutCancel(ctx), id)
		return nil, fmt.Errorf("docker: start %s: container %.12s: %w", spec.ID, id, err)
	}
	d.logger.DebugContext(ctx, "sandbox started", "sandbox", spec.ID, "container", id, "image", image, "pid", pid)
	return &sandbox.Handle{
		ID:     spec.ID,
		Driver: Name,
		Secret: spec.Secret,
		State:  state{ContainerID: id, RunDir: spec.RunDir, PID: pid}.encode(),
	}, nil
}

// startWithSecret starts the container with the guest's stdin attached,
// writes the secret to it and closes it (the container is StdinOnce), and
// returns the container's init pid. Attaching before the start, as `docker
// start -ai` does, means nothing can read the container's stdin first.
func (d *Driver) startWithSecret(ctx context.Context, id string, secret []byte) (int, error) {
	att, err := d.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true})
	if err != nil {
		return 0, fmt.Errorf("attach stdin: %w", d.unavailable(err))
	}
	defer att.Close()
	if _, err := d.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return 0, d.unavailable(err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = att.Conn.SetWriteDeadline(dl)
	}
	if _, err := att.Conn.Write(guest.EncodeSecret(secret)); err != nil {
		return 0, fmt.Errorf("hand the guest its secret: %w", err)
	}
	if err := att.CloseWrite(); err != nil {
		return 0, fmt.Errorf("hand the guest its secret: %w", err)
	}
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, d.unavailable(err)
	}
	if res.Container.State == nil || res.Container.State.Pid <= 0 {
		return 0, errors.New("the engine reports no init pid: the guest exited at once")
	}
	return res.Container.State.Pid, nil
}

// create creates the container, replacing a stopped one left under the same
// name by an earlier Start of this sandbox (a stop keeps the container so its
// exit code can be inspected; a restart starts fresh from the Spec).
func (d *Driver) create(ctx context.Context, o *createOptions) (string, error) {
	for attempt := 0; ; attempt++ {
		res, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       o.name,
			Config:     o.config,
			HostConfig: o.host,
		})
		switch {
		case err == nil:
			for _, w := range res.Warnings {
				d.logger.WarnContext(ctx, "docker create warning", "container", o.name, "warning", w)
			}
			return res.ID, nil
		case cerrdefs.IsNotFound(err):
			return "", unknownImage(o.config.Image, err)
		case cerrdefs.IsConflict(err) && attempt == 0:
			if err := d.replaceStale(ctx, o.name); err != nil {
				return "", err
			}
		default:
			return "", d.unavailable(err)
		}
	}
}

// replaceStale removes a container named name unless it is running.
func (d *Driver) replaceStale(ctx context.Context, name string) error {
	res, err := d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil // removed in the meantime
	}
	if err != nil {
		return d.unavailable(err)
	}
	if st := res.Container.State; st != nil && st.Running {
		return fmt.Errorf("container %s (%.12s) is already running: stop or destroy the sandbox first", name, res.Container.ID)
	}
	d.logger.InfoContext(ctx, "replacing stopped container", "container", name, "id", res.Container.ID)
	return d.remove(ctx, res.Container.ID)
}

// remove force-removes a container; one that is already gone is not an error.
func (d *Driver) remove(ctx context.Context, id string) error {
	_, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return d.unavailable(err)
	}
	return nil
}
