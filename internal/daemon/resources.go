package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/files"
	"github.com/agentkernel/agentkernel/internal/memory"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// newResources builds the session resources service (nil without Managed
// Agents storage) and registers its /mnt binds with the sandbox manager.
// The files and memory services are given with SetFiles and SetMemory.
func newResources(cfg config.Config, st store.Store, mgr *sandbox.Manager, vaults *vault.Service, log *slog.Logger) *resources.Service {
	if vaults == nil || mgr == nil {
		return nil
	}
	svc := resources.New(resources.Config{
		Store: st, Keys: vaults.Keys(), Dir: filepath.Join(cfg.Home, "resources"), Sandboxes: mgr,
		Log: log.With("component", "resources"), Failpoint: failpointHook(cfg.Home, log),
		GitInternalHosts: cfg.GitInternalHostPatterns(),
	})
	mgr.AddHooks(svc.Hooks())
	return svc
}

// Resources returns the session resources service (nil without Managed
// Agents storage).
func (d *Daemon) Resources() *resources.Service { return d.resources }

// resourceFiles adapts the Files API's service to what session resources
// use: file resources are read from it, outputs are stored through it.
type resourceFiles struct{ s *files.Service }

func fileInfo(f *store.File) resources.FileInfo {
	return resources.FileInfo{ID: f.ID, Filename: f.Filename, SizeBytes: f.SizeBytes, SHA256: f.SHA256}
}

func (a resourceFiles) Get(ctx context.Context, tenantID, id string) (resources.FileInfo, error) {
	f, err := a.s.Get(ctx, tenantID, id)
	if err != nil {
		return resources.FileInfo{}, err
	}
	return fileInfo(f), nil
}

func (a resourceFiles) Open(ctx context.Context, tenantID, id string) (io.ReadCloser, resources.FileInfo, error) {
	rc, f, err := a.s.Open(ctx, tenantID, id)
	if err != nil {
		return nil, resources.FileInfo{}, err
	}
	return rc, fileInfo(f), nil
}

// CreateOutput stores a session output: scoped to the session, downloadable
// (it is the agent's work, for the user to fetch), named by its path under
// the outputs directory.
func (a resourceFiles) CreateOutput(ctx context.Context, tenantID, sessionID, name string, body io.Reader) (resources.FileInfo, error) {
	f, err := a.s.Create(ctx, tenantID, files.CreateParams{Filename: name, KeepPath: true, Body: body,
		ScopeSessionID: sessionID, Downloadable: true})
	if err != nil {
		return resources.FileInfo{}, err
	}
	return fileInfo(f), nil
}

func (a resourceFiles) ListBySession(ctx context.Context, tenantID, sessionID string) ([]resources.FileInfo, error) {
	fs, err := a.s.ListBySession(ctx, tenantID, sessionID)
	if err != nil {
		return nil, err
	}
	out := make([]resources.FileInfo, len(fs))
	for i, f := range fs {
		out[i] = fileInfo(f)
	}
	return out, nil
}

// resourceMemory adapts the memory service to what memory_store resources
// use.
type resourceMemory struct{ s *memory.Service }

func (a resourceMemory) GetStore(ctx context.Context, tenantID, storeID string) (resources.MemoryStoreInfo, error) {
	ms, err := a.s.GetStore(ctx, tenantID, storeID)
	if err != nil {
		return resources.MemoryStoreInfo{}, err
	}
	return resources.MemoryStoreInfo{ID: ms.ID, Name: ms.Name, Description: ms.Description, Archived: ms.ArchivedAt != nil}, nil
}

func memoryEntries(es []memory.Entry) []resources.MemoryEntry {
	out := make([]resources.MemoryEntry, len(es))
	for i, e := range es {
		out[i] = resources.MemoryEntry{Path: e.Path, Content: e.Content, MemoryID: e.MemoryID, VersionID: e.VersionID}
	}
	return out
}

func (a resourceMemory) Snapshot(ctx context.Context, tenantID, storeID string) ([]resources.MemoryEntry, error) {
	es, err := a.s.Snapshot(ctx, tenantID, storeID)
	if err != nil {
		return nil, err
	}
	return memoryEntries(es), nil
}

func (a resourceMemory) Sync(ctx context.Context, tenantID, storeID, sessionID string, changes []resources.MemoryChange) ([]resources.MemoryEntry, error) {
	cs := make([]memory.Change, len(changes))
	for i, c := range changes {
		cs[i] = memory.Change{Path: c.Path, Content: c.Content, BaseVersionID: c.BaseVersionID}
	}
	es, err := a.s.Sync(ctx, tenantID, storeID, memory.Actor{SessionID: sessionID}, cs)
	if err != nil {
		return nil, err
	}
	return memoryEntries(es), nil
}
