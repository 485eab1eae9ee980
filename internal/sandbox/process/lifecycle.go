package process

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// killWait bounds the wait for a SIGKILLed sandbox to disappear.
const killWait = 10 * time.Second

// Stop implements sandbox.Driver: SIGTERM to the guest (which kills its
// process groups and exits), then SIGKILL after timeout. Killing the PID
// namespace's init kills everything in the namespace; the cgroup is swept
// too in case a process is on its way out.
func (d *Driver) Stop(ctx context.Context, h *sandbox.Handle, timeout time.Duration) error {
	st, err := decodeState(h)
	if err != nil {
		return err
	}
	if !st.alive() {
		d.stopped(h.ID, st)
		return nil
	}
	if timeout > 0 {
		st.signal(syscall.SIGTERM)
		if d.waitGone(ctx, st, timeout) {
			d.stopped(h.ID, st)
			return nil
		}
		d.log.Warn("sandbox ignored SIGTERM, killing", "sandbox", h.ID, "timeout", timeout)
	}
	st.signal(syscall.SIGKILL)
	killCgroups(st.CgroupDirs)
	if !d.waitGone(context.WithoutCancel(ctx), st, killWait) {
		return fmt.Errorf("process driver: sandbox %s (pid %d) survived SIGKILL for %s", h.ID, st.PID, killWait)
	}
	d.stopped(h.ID, st)
	return nil
}

// stopped reaps bwrap and removes the sandbox's cgroups: the next Start
// creates them afresh, and a stopped sandbox's handle is forgotten by the
// manager, so Destroy would never see these dirs again.
func (d *Driver) stopped(id string, st *state) {
	d.reapBwrap(id)
	if err := removeCgroups(st.CgroupDirs); err != nil {
		d.log.Warn("cgroups of a stopped sandbox not removed", "sandbox", id, "err", err)
	}
}

// waitGone polls until the guest is gone or the wait ends.
func (d *Driver) waitGone(ctx context.Context, st *state, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		if !st.alive() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return !st.alive()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// reapBwrap waits briefly for this process's bwrap child of the sandbox to
// be reaped (it exits right after the guest), so Inspect can report the
// exit code. Sandboxes started by another daemon process have no entry.
func (d *Driver) reapBwrap(id string) {
	d.mu.Lock()
	p := d.running[id]
	d.mu.Unlock()
	if p == nil {
		return
	}
	select {
	case <-p.exited:
	case <-time.After(killWait):
	}
}

// Destroy implements sandbox.Driver: stop at once, then remove the
// sandbox's cgroups and the guest's socket and log from the run dir.
func (d *Driver) Destroy(ctx context.Context, h *sandbox.Handle) error {
	st, err := decodeState(h)
	if err != nil {
		return err
	}
	if err := d.Stop(ctx, h, 0); err != nil {
		return err
	}
	if err := removeCgroups(st.CgroupDirs); err != nil {
		return fmt.Errorf("process driver: destroy %s: %w", h.ID, err)
	}
	if st.Socket != "" {
		_ = os.Remove(st.Socket)
		_ = os.Remove(filepath.Join(filepath.Dir(st.Socket), LogName))
	}
	d.mu.Lock()
	delete(d.running, h.ID)
	d.mu.Unlock()
	return nil
}

// Inspect implements sandbox.Driver. ExitCode is bwrap's (which passes on
// the guest's) when this daemon process started the sandbox, else -1.
func (d *Driver) Inspect(_ context.Context, h *sandbox.Handle) (*sandbox.Status, error) {
	st, err := decodeState(h)
	if err != nil {
		return nil, err
	}
	running := st.alive()
	s := &sandbox.Status{
		Running:       running,
		ExitCode:      -1,
		StartedAt:     st.StartedAt,
		LimitsApplied: st.Limits,
		Enforcement:   st.enforcement(running),
		Detail:        map[string]string{"pid": strconv.Itoa(st.PID)},
	}
	for i, dir := range st.CgroupDirs {
		s.Detail["cgroup."+strconv.Itoa(i)] = dir
	}
	for k, e := range s.Enforcement {
		if e.Mechanism == sandbox.NotEnforced {
			s.Detail["limit."+k] = "not enforced: " + e.Reason
		}
	}
	if !s.Running {
		d.mu.Lock()
		p := d.running[h.ID]
		d.mu.Unlock()
		if p != nil {
			select {
			case <-p.exited:
				s.ExitCode = p.exitCode
			default:
			}
		}
	}
	return s, nil
}

// Recover implements sandbox.Driver: the guest must still be the same
// process (pid and start time) and answer on its socket.
func (d *Driver) Recover(ctx context.Context, h *sandbox.Handle) error {
	st, err := decodeState(h)
	if err != nil {
		return err
	}
	if !st.alive() {
		return fmt.Errorf("process driver: recover %s (pid %d not running): %w", h.ID, st.PID, sandbox.ErrGone)
	}
	c := guest.NewClient(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, h) }, h.Secret)
	defer c.Close()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Health(hctx); err != nil {
		return fmt.Errorf("process driver: recover %s (guest not answering: %v): %w", h.ID, err, sandbox.ErrGone)
	}
	return nil
}

// Dial implements sandbox.Driver: the socket the driver created in the
// private run dir, checked to be the same socket file.
func (d *Driver) Dial(ctx context.Context, h *sandbox.Handle) (net.Conn, error) {
	st, err := decodeState(h)
	if err != nil {
		return nil, err
	}
	if st.Socket == "" {
		return nil, fmt.Errorf("process driver: handle of %s has no guest socket (started by an earlier version)", h.ID)
	}
	return sandbox.DialUnix(ctx, filepath.Dir(st.Socket), filepath.Base(st.Socket), sandbox.Peer{Ino: st.SocketIno})
}
