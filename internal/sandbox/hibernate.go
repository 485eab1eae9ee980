package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/snapshot"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Wake wakes a sandbox now (cold → active).
func (m *Manager) Wake(ctx context.Context, tenantID, id string) (*Info, error) {
	if _, err := m.load(ctx, tenantID, id); err != nil {
		return nil, err
	}
	e := m.entry(id)
	e.mu.Lock()
	err := m.wake(ctx, e, id)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return m.Get(ctx, tenantID, id)
}

// Hibernate hibernates a sandbox now: snapshot, verify, record the backup,
// stop. Hibernating a cold sandbox is a no-op.
func (m *Manager) Hibernate(ctx context.Context, tenantID, id string) (*Info, error) {
	if _, err := m.load(ctx, tenantID, id); err != nil {
		return nil, err
	}
	m.runBeforeStop(ctx, id)
	e := m.entry(id)
	e.mu.Lock()
	err := m.hibernate(ctx, e, id, "requested")
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return m.Get(ctx, tenantID, id)
}

// Snapshot takes a verified backup without stopping the sandbox.
func (m *Manager) Snapshot(ctx context.Context, tenantID, id string) (*store.Backup, error) {
	if _, err := m.load(ctx, tenantID, id); err != nil {
		return nil, err
	}
	e := m.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if Derive(sb) == StateDestroyed {
		return nil, fmt.Errorf("sandbox %s: %w", id, ErrDestroyed)
	}
	return m.snapshot(ctx, sb)
}

// hibernate is the idle transition active → stopping → cold. The caller
// holds e.mu for writing. A snapshot that did not verify never leads to a
// stop: on any failure before the backup is recorded the sandbox stays
// active and the error is returned.
func (m *Manager) hibernate(ctx context.Context, e *entry, id, reason string) error {
	e.activeGen.Store(0)
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	switch Derive(sb) {
	case StateDestroyed:
		return fmt.Errorf("sandbox %s: %w", id, ErrDestroyed)
	case StateCold:
		return nil
	}
	now := m.clock.Now()
	sb.StoppingAt = &now
	if sb, err = m.cfg.Store.UpdateSandbox(ctx, sb); err != nil {
		return err
	}
	if _, err := m.snapshot(ctx, sb); err != nil {
		// Back to active: nothing was stopped.
		if sb2, gerr := m.cfg.Store.GetSandbox(ctx, id); gerr == nil {
			sb2.StoppingAt = nil
			_, _ = m.cfg.Store.UpdateSandbox(context.WithoutCancel(ctx), sb2)
		}
		return fmt.Errorf("sandbox %s: not stopped, snapshot failed: %w", id, err)
	}
	if f := m.faults(); f != nil && f.BeforeStop != nil {
		if err := f.BeforeStop(id); err != nil {
			return err
		}
	}
	if sb, err = m.cfg.Store.GetSandbox(ctx, id); err != nil {
		return err
	}
	if err := m.stopDriver(ctx, e, sb); err != nil {
		return err
	}
	if _, err := m.markCold(ctx, sb); err != nil {
		return err
	}
	m.metrics.hibernations.WithLabelValues(sb.Driver, reason).Inc()
	m.log.InfoContext(ctx, "sandbox hibernated", "sandbox", id, "reason", reason)
	return nil
}

// stopDriver stops the running instance (if any) and drops the client.
func (m *Manager) stopDriver(ctx context.Context, e *entry, sb *store.Sandbox) error {
	if len(sb.Handle) == 0 {
		return nil
	}
	var h Handle
	if err := json.Unmarshal(sb.Handle, &h); err != nil {
		return fmt.Errorf("sandbox %s: bad handle: %w", sb.ID, err)
	}
	d, ok := m.cfg.Drivers[h.Driver]
	if !ok {
		return fmt.Errorf("sandbox %s: %w %q", sb.ID, ErrUnknownDriver, h.Driver)
	}
	e.dropClient()
	if err := d.Stop(context.WithoutCancel(ctx), &h, m.cfg.StopTimeout); err != nil && !errors.Is(err, ErrGone) {
		return fmt.Errorf("sandbox %s: stop: %w", sb.ID, err)
	}
	return nil
}

// snapshot streams the workspace, and the guest's records beside it, as
// tar+zstd into a new blob, reads it back to verify (size and sha256 by
// the blob store, entry counts and bytes by the archive), and only then
// records the backup.
func (m *Manager) snapshot(ctx context.Context, sb *store.Sandbox) (*store.Backup, error) {
	start := m.clock.Now()
	backupID := ids.New("bkp")
	key := fmt.Sprintf("backups/%s/%s/%s.tar.zst", sb.TenantID, sb.ID, backupID)
	// Until the backup row is committed nothing references the blob: the
	// pin keeps the GC from collecting it meanwhile.
	if m.cfg.BlobPins != nil {
		defer m.cfg.BlobPins.Pin(key)()
	}
	pr, pw := io.Pipe()
	var wst snapshot.Stats
	werr := make(chan error, 1)
	go func() {
		var err error
		wst, err = snapshot.Write(ctx, m.workspaceDir(sb.ID), pw, snapshot.WriteOptions{Runtime: m.runtimeDir(sb.ID)})
		pw.CloseWithError(err)
		werr <- err
	}()
	binfo, err := m.cfg.Blobs.Put(ctx, key, pr)
	pr.CloseWithError(err)
	if e := <-werr; e != nil && err == nil {
		err = e
	}
	if err != nil {
		_ = m.cfg.Blobs.Delete(context.WithoutCancel(ctx), key)
		return nil, fmt.Errorf("write snapshot: %w", err)
	}
	if f := m.faults(); f != nil && f.BeforeSnapshotVerify != nil {
		if err := f.BeforeSnapshotVerify(sb.ID); err != nil {
			return nil, err
		}
	}
	if err := m.verify(ctx, key, wst); err != nil {
		_ = m.cfg.Blobs.Delete(context.WithoutCancel(ctx), key)
		return nil, err
	}
	stats, _ := json.Marshal(wst)
	now := m.clock.Now()
	b, err := m.cfg.Store.CreateBackup(ctx, &store.Backup{
		ID: backupID, TenantID: sb.TenantID, Environment: sb.Environment, SessionKey: sb.SessionKey,
		SandboxID: sb.ID, BlobKey: key, Size: binfo.Size, SHA256: binfo.SHA256, Stats: stats,
		Generation: max(sb.Generation, m.readStamp(sb.ID)), CreatedAt: now, ExpiresAt: now.Add(m.cfg.BackupTTL),
	})
	if err != nil {
		_ = m.cfg.Blobs.Delete(context.WithoutCancel(ctx), key)
		return nil, err
	}
	m.metrics.snapshotBytes.WithLabelValues(sb.Driver).Add(float64(binfo.Size))
	m.metrics.snapshotDuration.WithLabelValues(sb.Driver).Observe(m.clock.Now().Sub(start).Seconds())
	return b, nil
}

// verify reads the blob back in full: the blob store checks its size and
// sha256 at EOF, and the archive must hold exactly what was written.
func (m *Manager) verify(ctx context.Context, key string, want snapshot.Stats) error {
	r, _, err := m.cfg.Blobs.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("verify snapshot: %w", err)
	}
	defer r.Close()
	got, err := snapshot.Verify(ctx, r)
	if err != nil {
		return fmt.Errorf("verify snapshot: %w", err)
	}
	// Drain to EOF so the blob store's checksum runs even if the archive
	// ended before the blob did.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("verify snapshot: %w", err)
	}
	// What the writer skipped (FIFOs, sockets, devices) is not in the
	// archive: the reader cannot count it.
	got.Skipped = want.Skipped
	if got != want {
		return fmt.Errorf("verify snapshot: archive holds %+v, wrote %+v", got, want)
	}
	return nil
}

// Destroy takes an eager final snapshot, destroys the instance, marks the
// sandbox destroyed (terminal) and removes its host directories. Backups
// stay until their TTL.
func (m *Manager) Destroy(ctx context.Context, tenantID, id string) (*Info, error) {
	if _, err := m.load(ctx, tenantID, id); err != nil {
		return nil, err
	}
	m.runBeforeStop(ctx, id)
	e := m.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.activeGen.Store(0)
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if Derive(sb) == StateDestroyed {
		return m.info(sb), nil
	}
	if _, err := os.Stat(m.workspaceDir(id)); err == nil {
		if _, err := m.snapshot(ctx, sb); err != nil {
			return nil, fmt.Errorf("sandbox %s: not destroyed, final snapshot failed: %w", id, err)
		}
	}
	if len(sb.Handle) > 0 {
		var h Handle
		if err := json.Unmarshal(sb.Handle, &h); err == nil {
			if d, ok := m.cfg.Drivers[h.Driver]; ok {
				e.dropClient()
				if err := d.Destroy(context.WithoutCancel(ctx), &h); err != nil {
					return nil, fmt.Errorf("sandbox %s: destroy: %w", id, err)
				}
			}
		}
	}
	now := m.clock.Now()
	sb.Handle, sb.StartedAt, sb.WarmedAt, sb.StoppingAt, sb.DestroyedAt = nil, nil, nil, nil, &now
	if sb, err = m.cfg.Store.UpdateSandbox(ctx, sb); err != nil {
		return nil, err
	}
	_ = os.RemoveAll(filepath.Join(m.cfg.DataDir, id))
	_ = os.RemoveAll(m.runDir(id))
	m.mu.Lock()
	delete(m.entries, id)
	m.mu.Unlock()
	m.log.InfoContext(ctx, "sandbox destroyed", "sandbox", id)
	return m.info(sb), nil
}

func (m *Manager) faults() *Faults { return m.cfg.Faults }

// Inspect asks the driver about the running instance (nil Status when the
// sandbox is not running): whether it runs and how limits were applied.
func (m *Manager) Inspect(ctx context.Context, tenantID, id string) (*Status, error) {
	sb, err := m.load(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if len(sb.Handle) == 0 {
		return nil, nil
	}
	var h Handle
	if err := json.Unmarshal(sb.Handle, &h); err != nil {
		return nil, fmt.Errorf("sandbox %s: bad handle: %w", id, err)
	}
	d, ok := m.cfg.Drivers[h.Driver]
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w %q", id, ErrUnknownDriver, h.Driver)
	}
	st, err := d.Inspect(ctx, &h)
	if errors.Is(err, ErrGone) {
		return &Status{Running: false}, nil
	}
	return st, err
}
