package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/snapshot"
	"github.com/agentkernel/agentkernel/internal/store"
)

// wake brings a sandbox to active. The caller holds e.mu for writing. It
// re-reads the record, so it is a no-op when another caller already woke it.
func (m *Manager) wake(ctx context.Context, e *entry, id string) error {
	e.activeGen.Store(0)
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	switch Derive(sb) {
	case StateDestroyed:
		return fmt.Errorf("sandbox %s: %w", id, ErrDestroyed)
	case StateActive:
		if e.client != nil && m.markerOK(ctx, e.client, sb.Generation) {
			return nil
		}
	case StateStopping:
		// A stop that did not finish (this node holds the lock, so it is not
		// running now): the sandbox was never stopped without a verified
		// snapshot, so it is still usable. Drop the stale fact.
		sb.StoppingAt = nil
		if sb, err = m.cfg.Store.UpdateSandbox(ctx, sb); err != nil {
			return err
		}
	}
	start := m.clock.Now()
	if len(sb.Handle) == 0 {
		if sb, err = m.startDriver(ctx, e, sb); err != nil {
			return err
		}
	} else if e.client == nil {
		if err := m.attach(ctx, e, sb); err != nil {
			// The instance is gone: forget it and start a new one.
			if sb, err = m.markCold(ctx, sb); err != nil {
				return err
			}
			if sb, err = m.startDriver(ctx, e, sb); err != nil {
				return err
			}
		}
	}
	err = m.warmUp(ctx, e, sb)
	if e.poolTrash != "" {
		// The wake is done with the CPU: the pool may refill.
		m.refillAfter(e.poolKey, e.poolTrash, e.poolOldRun)
		e.poolTrash, e.poolOldRun = "", ""
	}
	if errors.Is(err, ErrUntrustedPeer) {
		// Something inside the sandbox replaced the guest's socket (it can
		// in a docker sandbox, where the socket's directory is shared): the
		// daemon talks to nothing there, and the guest can no longer be
		// reached. Start a new instance; the workspace stays.
		m.log.WarnContext(ctx, "the guest's socket was tampered with from inside the sandbox: restarting it", "sandbox", id, "err", err)
		if sb, err = m.restart(ctx, e, id); err != nil {
			return err
		}
		err = m.warmUp(ctx, e, sb)
	}
	if err != nil {
		return err
	}
	m.metrics.warmup.WithLabelValues(sb.Driver).Observe(m.clock.Now().Sub(start).Seconds())
	return nil
}

// restart stops the running instance and starts a new one.
func (m *Manager) restart(ctx context.Context, e *entry, id string) (*store.Sandbox, error) {
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := m.stopDriver(ctx, e, sb); err != nil {
		return nil, err
	}
	if sb, err = m.markCold(ctx, sb); err != nil {
		return nil, err
	}
	return m.startDriver(ctx, e, sb)
}

// startDriver restores the workspace if it needs it (host side, before the
// sandbox can see it), starts the driver and records the handle: from then
// on the derived state is warming.
func (m *Manager) startDriver(ctx context.Context, e *entry, sb *store.Sandbox) (*store.Sandbox, error) {
	d, ok := m.cfg.Drivers[sb.Driver]
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w %q", sb.ID, ErrUnknownDriver, sb.Driver)
	}
	if err := m.migrateStamp(ctx, sb); err != nil {
		return nil, err
	}
	if err := m.restoreIfNeeded(ctx, sb); err != nil {
		return nil, err
	}
	limits := m.limitsOf(sb)
	// Sandboxes created by earlier versions have none yet.
	if err := os.MkdirAll(m.runtimeDir(sb.ID), 0o755); err != nil {
		return nil, err
	}
	mounts, env := m.hookMounts(sb)
	if key, ok := m.poolKeyOf(sb); ok {
		if slot := m.take(key); slot != nil {
			assigned, err := m.assign(ctx, e, sb, slot, mounts, env)
			if err == nil {
				return assigned, nil
			}
			var crash *poolCrash
			var stuck *poolStuck
			if errors.As(err, &crash) || errors.As(err, &stuck) {
				return nil, err
			}
			m.log.WarnContext(ctx, "sandbox pool: assignment failed, starting a fresh sandbox", "sandbox", sb.ID, "slot", slot.id, "err", err)
			m.metrics.poolAssign.WithLabelValues(key.Driver, "assign_failed").Inc()
			if sb, err = m.cfg.Store.GetSandbox(ctx, sb.ID); err != nil {
				return nil, err
			}
		} else {
			m.metrics.poolAssign.WithLabelValues(key.Driver, "pool_empty").Inc()
		}
	} else if m.pool.size > 0 {
		// A driver that does not pool (docker).
		m.metrics.poolAssign.WithLabelValues(sb.Driver, "not_pooled").Inc()
	}
	run, err := m.resetRunDir(sb.ID)
	if err != nil {
		return nil, err
	}
	egressDir, err := m.openEgress(e, sb)
	if err != nil {
		return nil, err
	}
	secret := guest.NewSecret()
	h, err := d.Start(ctx, Spec{
		ID: sb.ID, Image: sb.Image, Network: sb.Network, Limits: limits,
		WorkspaceDir: m.workspaceDir(sb.ID), RuntimeDir: m.runtimeDir(sb.ID),
		RunDir: run, GuestBinary: m.cfg.GuestBinary, EgressDir: egressDir,
		Secret: secret,
		Labels: map[string]string{"agentkernel.tenant": sb.TenantID},
		Mounts: mounts, Env: env,
	})
	if err != nil {
		e.closeEgress()
		return nil, err
	}
	h.Secret = secret
	raw, _ := json.Marshal(h)
	now := m.clock.Now()
	sb.Handle, sb.StartedAt, sb.WarmedAt = raw, &now, nil
	sb, err = m.cfg.Store.UpdateSandbox(ctx, sb)
	if err != nil {
		// We could not record the instance: do not leave it running unseen.
		_ = d.Destroy(context.WithoutCancel(ctx), h)
		return nil, err
	}
	m.setClient(e, d, h)
	return sb, nil
}

// resetRunDir empties the sandbox's private run directory (whatever an
// earlier instance left there, including anything a sandbox of a version
// that mounted it could write) and recreates it with mode 0700.
func (m *Manager) resetRunDir(id string) (string, error) {
	run := m.runDir(id)
	if err := os.RemoveAll(run); err != nil {
		return "", fmt.Errorf("sandbox %s: reset run dir: %w", id, err)
	}
	if err := os.Mkdir(run, 0o700); err != nil {
		return "", fmt.Errorf("sandbox %s: run dir: %w", id, err)
	}
	return run, nil
}

// attach reconnects to a running instance from its persisted handle.
func (m *Manager) attach(ctx context.Context, e *entry, sb *store.Sandbox) error {
	var h Handle
	if err := json.Unmarshal(sb.Handle, &h); err != nil {
		return fmt.Errorf("sandbox %s: bad handle: %w", sb.ID, err)
	}
	d, ok := m.cfg.Drivers[h.Driver]
	if !ok {
		return fmt.Errorf("sandbox %s: %w %q", sb.ID, ErrUnknownDriver, h.Driver)
	}
	if len(h.Secret) != guest.SecretSize {
		// Started by a version without a guest secret, when the sandbox
		// could redirect the daemon's socket: restart it rather than trust
		// anything it says. Its workspace stays on disk.
		m.log.WarnContext(ctx, "restarting a sandbox started without a guest secret", "sandbox", sb.ID)
		if err := d.Stop(context.WithoutCancel(ctx), &h, m.cfg.StopTimeout); err != nil && !errors.Is(err, ErrGone) {
			return fmt.Errorf("sandbox %s: stop the untrusted instance: %w", sb.ID, err)
		}
		return fmt.Errorf("sandbox %s: %w", sb.ID, errUntrustedHandle)
	}
	if err := d.Recover(ctx, &h); err != nil {
		// The caller forgets the instance and starts a new one; one that is
		// still there but does not answer (hung, stopped, its socket gone)
		// would run on unseen, holding its cgroups and its workspace.
		if serr := d.Stop(context.WithoutCancel(ctx), &h, m.cfg.StopTimeout); serr != nil && !errors.Is(serr, ErrGone) {
			return fmt.Errorf("sandbox %s: stop the instance that cannot be reattached (%v): %w", sb.ID, err, serr)
		}
		return err
	}
	if _, err := m.openEgress(e, sb); err != nil {
		// Running, but its one way out cannot be served (this daemon runs
		// without the proxy now): stop it rather than leave it unseen.
		if serr := d.Stop(context.WithoutCancel(ctx), &h, m.cfg.StopTimeout); serr != nil && !errors.Is(serr, ErrGone) {
			return fmt.Errorf("sandbox %s: stop the instance whose egress cannot be served (%v): %w", sb.ID, err, serr)
		}
		return err
	}
	m.setClient(e, d, &h)
	return nil
}

// errUntrustedHandle: the handle has no secret; the instance was stopped.
var errUntrustedHandle = errors.New("instance from an earlier version stopped: it has no guest secret")

// setClient points the entry's client at the instance h names.
func (m *Manager) setClient(e *entry, d Driver, h *Handle) {
	if e.client != nil && bytes.Equal(e.secret, h.Secret) {
		return
	}
	if e.client != nil {
		e.client.Close()
	}
	hc := *h
	e.dial = func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, &hc) }
	e.client, e.secret = guest.NewClient(e.dial, hc.Secret), hc.Secret
}

// dropClient forgets the entry's client (the instance is stopping).
func (e *entry) dropClient() {
	e.closeEgress()
	if e.client != nil {
		e.client.Close()
	}
	e.client, e.dial, e.secret = nil, nil, nil
}

// markCold forgets the running instance (it is gone).
func (m *Manager) markCold(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error) {
	sb.Handle, sb.StartedAt, sb.WarmedAt, sb.StoppingAt = nil, nil, nil, nil
	return m.cfg.Store.UpdateSandbox(ctx, sb)
}

// warmUp follows the seed's order: probe `exec true` (10 attempts), read
// the warm marker, restore if absent (done host-side before start, see
// restoreIfNeeded), mount resources, set contexts, write the marker with a
// new generation.
func (m *Manager) warmUp(ctx context.Context, e *entry, sb *store.Sandbox) error {
	// A pooled instance ran `exec true` before it was pooled and has just
	// answered its assignment: no probe.
	// A pooled instance's workspace was stamped with the generation it is
	// warming to when it was moved in (assign).
	pooled, poolGen := e.pooled, e.poolGen
	e.pooled = false
	if !pooled {
		if err := m.probe(ctx, e, sb); err != nil {
			return err
		}
	}
	if !pooled && m.markerOK(ctx, e.client, sb.Generation) && sb.Generation > 0 {
		// Already warm (e.g. the daemon died between writing the marker and
		// recording it): only the record is missing.
		if sb.WarmedAt == nil {
			now := m.clock.Now()
			sb.WarmedAt = &now
			_, err := m.cfg.Store.UpdateSandbox(ctx, sb)
			return err
		}
		return nil
	}
	// The marker is missing: a fresh or recycled sandbox. Its workspace may
	// still be current (the stamp says so); restore happened before start if
	// it was not.
	if stamp := m.readStamp(sb.ID); !pooled && stamp < sb.Generation {
		if b, err := m.cfg.Store.LatestBackup(ctx, backupKey(sb), m.clock.Now()); err == nil && b.Generation > stamp {
			// A recycled instance whose workspace is older than our last
			// backup: restart it around a host-side restore.
			if err := m.stopDriver(ctx, e, sb); err != nil {
				return err
			}
			if sb, err = m.markCold(ctx, sb); err != nil {
				return err
			}
			if sb, err = m.startDriver(ctx, e, sb); err != nil {
				return err
			}
			e.pooled = false
			if err := m.probe(ctx, e, sb); err != nil {
				return err
			}
		}
	}
	if err := m.runAfterWarm(ctx, sb, e.client); err != nil {
		return fmt.Errorf("sandbox %s: warm-up: %w", sb.ID, err)
	}
	gen := poolGen
	if !pooled {
		gen = max(sb.Generation, m.readStamp(sb.ID)) + 1
		if err := m.writeStamp(sb.ID, gen); err != nil {
			return err
		}
	}
	if err := e.client.WriteFile(ctx, guest.WriteFileRequest{Path: WarmMarkerPath, Data: []byte(strconv.FormatInt(gen, 10)), Mode: 0o644}); err != nil {
		return fmt.Errorf("sandbox %s: write warm marker: %w", sb.ID, err)
	}
	// Just written: as good as a probe of it.
	e.probedAt.Store(time.Now().UnixNano())
	e.probedGen.Store(gen)
	now := m.clock.Now()
	sb.Generation, sb.WarmedAt, sb.LastActivityAt = gen, &now, now
	if _, err := m.cfg.Store.UpdateSandbox(ctx, sb); err != nil {
		return err
	}
	e.activeGen.Store(gen)
	return nil
}

// probe waits for the guest socket, then runs `exec true` until it answers,
// at most ProbeAttempts times.
func (m *Manager) probe(ctx context.Context, e *entry, sb *store.Sandbox) error {
	return probeGuest(ctx, e.dial, e.client, sb.Driver, sb.ID)
}

// probeGuest is probe for any guest: dial reaches its socket, c talks to
// it.
func probeGuest(ctx context.Context, dial guest.Dialer, c *guest.Client, driver, id string) error {
	// Waiting for the socket is not a probe attempt: it is how long the
	// driver takes to start the guest (the process driver's socket exists
	// before the guest does; a docker guest creates its own).
	deadline := time.Now().Add(30 * time.Second)
	// Poll finely: the guest of a process sandbox is up within ~15 ms, and
	// every millisecond of sleep past that is wake latency.
	for delay := 200 * time.Microsecond; time.Now().Before(deadline); delay = min(delay*2, 2*time.Millisecond) {
		conn, err := dial(ctx)
		if err == nil {
			conn.Close()
			break
		}
		if errors.Is(err, ErrUntrustedPeer) {
			return err // waiting will not help
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return err
		}
	}
	var last error
	delay := 2 * time.Millisecond
	for range ProbeAttempts {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := c.Exec(pctx, guest.ExecRequest{Argv: []string{"true"}}, nil)
		cancel()
		if err == nil && res.ExitCode == 0 {
			return nil
		}
		if errors.Is(err, ErrUntrustedPeer) {
			return err
		}
		if err == nil {
			err = fmt.Errorf("exec true exited %d", res.ExitCode)
		}
		last = err
		if err := sleepCtx(ctx, delay); err != nil {
			return err
		}
		delay = min(delay*2, time.Second)
	}
	return &UnavailableError{Driver: driver, Reason: fmt.Sprintf("sandbox %s did not answer `exec true` after %d attempts: %v", id, ProbeAttempts, last)}
}

func (m *Manager) markerOK(ctx context.Context, c *guest.Client, gen int64) bool {
	// The marker is the sandbox's to overwrite: never hold more of it than
	// a generation number takes.
	b, err := c.ReadFileMax(ctx, WarmMarkerPath, 32)
	if err != nil {
		return false
	}
	got, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return err == nil && got == gen
}

// restoreIfNeeded restores the latest backup into the host workspace when
// the workspace does not already hold that state or a newer one. The
// generation stamp beside the workspace decides (stamp.go), so a workspace
// that survived on disk is never overwritten by an older backup.
func (m *Manager) restoreIfNeeded(ctx context.Context, sb *store.Sandbox) error {
	stamp := m.readStamp(sb.ID)
	b, err := m.cfg.Store.LatestBackup(ctx, backupKey(sb), m.clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if b.Generation <= stamp {
		return nil
	}
	start := m.clock.Now()
	r, _, err := m.cfg.Blobs.Get(ctx, b.BlobKey)
	if err != nil {
		return fmt.Errorf("sandbox %s: open backup %s: %w", sb.ID, b.ID, err)
	}
	defer r.Close()
	st, err := snapshot.Replace(ctx, r, m.workspaceDir(sb.ID), m.runtimeDir(sb.ID))
	if err != nil {
		return fmt.Errorf("sandbox %s: restore backup %s: %w", sb.ID, b.ID, err)
	}
	// A backup taken by an earlier version holds its stamp; the backup's
	// generation is the truth.
	removeLegacyStamp(m.workspaceDir(sb.ID))
	if err := m.writeStamp(sb.ID, b.Generation); err != nil {
		return err
	}
	m.metrics.restore.WithLabelValues(sb.Driver).Observe(m.clock.Now().Sub(start).Seconds())
	m.log.InfoContext(ctx, "workspace restored", "sandbox", sb.ID, "backup", b.ID, "generation", b.Generation, "files", st.Files, "bytes", st.Bytes)
	return nil
}

func backupKey(sb *store.Sandbox) store.BackupKey {
	return store.BackupKey{TenantID: sb.TenantID, Environment: sb.Environment, SessionKey: sb.SessionKey}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
