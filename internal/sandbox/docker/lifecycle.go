package docker

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// Stop sends SIGTERM to the guest and SIGKILL after timeout (rounded up to
// whole seconds, Docker's unit). The container is kept, so Inspect still
// reports the exit code; Destroy removes it. A stopped or missing container is
// not an error.
func (d *Driver) Stop(ctx context.Context, h *sandbox.Handle, timeout time.Duration) error {
	id, err := containerID(h)
	if err != nil {
		return err
	}
	secs := int(math.Ceil(max(timeout, 0).Seconds()))
	_, err = d.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: stop %s: %w", h.ID, d.unavailable(err))
	}
	return nil
}

// Destroy force-removes the container. The workspace and run directories are
// host bind mounts and stay.
func (d *Driver) Destroy(ctx context.Context, h *sandbox.Handle) error {
	id, err := containerID(h)
	if err != nil {
		return err
	}
	if err := d.remove(ctx, id); err != nil {
		return fmt.Errorf("docker: destroy %s: %w", h.ID, err)
	}
	return nil
}

// Inspect reports the container's state. A removed container is ErrGone.
func (d *Driver) Inspect(ctx context.Context, h *sandbox.Handle) (*sandbox.Status, error) {
	c, err := d.inspect(ctx, h)
	if err != nil {
		return nil, err
	}
	st := &sandbox.Status{
		LimitsApplied: limitsApplied(c.HostConfig),
		Enforcement:   enforcement(c.HostConfig),
		Detail: map[string]string{
			"container_id": c.ID,
			"image":        c.Config.Image,
		},
	}
	if s := c.State; s != nil {
		st.Running = s.Running
		st.ExitCode = s.ExitCode
		st.StartedAt, _ = time.Parse(time.RFC3339Nano, s.StartedAt) // zero if never started
		st.Detail["state"] = string(s.Status)
		st.Detail["oom_killed"] = strconv.FormatBool(s.OOMKilled)
		if s.Error != "" {
			st.Detail["error"] = s.Error
		}
	}
	return st, nil
}

// limitsApplied is "docker" when the engine enforces any limit, "none" when
// the sandbox runs without limits.
func limitsApplied(hc *container.HostConfig) string {
	if hc != nil && (hc.Memory > 0 || hc.NanoCPUs > 0 || (hc.PidsLimit != nil && *hc.PidsLimit > 0)) {
		return "docker"
	}
	return "none"
}

// enforcement reads each limit back from the engine's HostConfig. A limit
// the engine dropped (it does so with only a warning when the host lacks
// the cgroup controller) shows as not enforced.
func enforcement(hc *container.HostConfig) map[string]sandbox.Enforcement {
	if hc == nil {
		return nil
	}
	dropped := sandbox.Enforcement{Mechanism: sandbox.NotEnforced, Reason: "the container's HostConfig has no such limit (the engine drops a limit its host cannot enforce, with a warning in the daemon log)"}
	out := map[string]sandbox.Enforcement{sandbox.LimitMemoryMB: dropped, sandbox.LimitPids: dropped, sandbox.LimitCPUs: dropped}
	if hc.Memory > 0 {
		out[sandbox.LimitMemoryMB] = sandbox.Enforcement{Value: float64(hc.Memory) / (1 << 20), Mechanism: sandbox.EnforcedDocker}
	}
	if hc.PidsLimit != nil && *hc.PidsLimit > 0 {
		out[sandbox.LimitPids] = sandbox.Enforcement{Value: float64(*hc.PidsLimit), Mechanism: sandbox.EnforcedDocker}
	}
	if hc.NanoCPUs > 0 {
		out[sandbox.LimitCPUs] = sandbox.Enforcement{Value: float64(hc.NanoCPUs) / 1e9, Mechanism: sandbox.EnforcedDocker}
	}
	return out
}

// Recover reattaches to a container started by an earlier daemon process,
// using only the persisted handle. Nothing needs re-establishing (the guest
// socket is on the host), so it only checks that the container still runs and
// is the one the handle names, with the same init: a container restarted
// behind the daemon's back has a guest that never got its secret.
func (d *Driver) Recover(ctx context.Context, h *sandbox.Handle) error {
	c, err := d.inspect(ctx, h)
	if err != nil {
		return err
	}
	if c.State == nil || !c.State.Running {
		return fmt.Errorf("docker: recover %s: container %.12s is not running: %w", h.ID, c.ID, sandbox.ErrGone)
	}
	if st, _ := decodeState(h); st != nil && st.PID != 0 && c.State.Pid != st.PID {
		return fmt.Errorf("docker: recover %s: container %.12s was restarted (init pid %d, was %d): %w", h.ID, c.ID, c.State.Pid, st.PID, sandbox.ErrGone)
	}
	return nil
}

// Dial implements sandbox.Driver: the guest's socket in the shared socket
// directory, reached without following anything the sandbox put there,
// and only if the container's init listens on it (SO_PEERCRED).
func (d *Driver) Dial(ctx context.Context, h *sandbox.Handle) (net.Conn, error) {
	st, err := decodeState(h)
	if err != nil {
		return nil, err
	}
	if st.RunDir == "" || st.PID <= 0 {
		return nil, fmt.Errorf("docker: handle of %s does not say where its guest listens (started by an earlier version)", h.ID)
	}
	return sandbox.DialUnix(ctx, st.RunDir, sockDirName+"/"+guestSockName, sandbox.Peer{PID: st.PID})
}

func (d *Driver) inspect(ctx context.Context, h *sandbox.Handle) (*container.InspectResponse, error) {
	id, err := containerID(h)
	if err != nil {
		return nil, err
	}
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("docker: sandbox %s: container %.12s: %w", h.ID, id, sandbox.ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("docker: inspect %s: %w", h.ID, d.unavailable(err))
	}
	c := &res.Container
	if c.Config == nil {
		c.Config = &container.Config{}
	}
	if got := c.Config.Labels[LabelSandbox]; got != h.ID {
		return nil, fmt.Errorf("docker: sandbox %s: container %.12s belongs to sandbox %q: %w", h.ID, id, got, sandbox.ErrGone)
	}
	return c, nil
}
