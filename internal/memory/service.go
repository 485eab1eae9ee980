// Package memory is the daemon's memory stores: what a session's mounted
// store is made from (Snapshot) and how what the agent changed there comes
// back as new memory versions (Sync).
package memory

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Entry is one live memory as a session sees it.
type Entry struct {
	Path      string
	Content   string
	MemoryID  string
	VersionID string
}

// Change is one file the agent changed under a store's mount since the
// snapshot it started from.
type Change struct {
	Path string
	// Content is the file's new content; nil means the file was deleted.
	Content *string
	// BaseVersionID is the version the session's copy started from ("" for
	// a file the session created).
	BaseVersionID string
}

// Actor is who a sync writes as: the session whose sandbox changed the
// files (recorded as a session_actor on each version).
type Actor struct {
	SessionID string
}

// Config configures a Service.
type Config struct {
	Store store.MemoryStores
	Log   *slog.Logger
	// BeforeWrite, when set, runs before each change a Sync writes (crash
	// tests stop the process there).
	BeforeWrite func(storeID, path string)
}

// Service reads and syncs memory stores.
type Service struct {
	st          store.MemoryStores
	log         *slog.Logger
	beforeWrite func(storeID, path string)
}

// New returns a Service.
func New(c Config) *Service {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{st: c.Store, log: log, beforeWrite: c.BeforeWrite}
}

// Store is the store the service reads and writes.
func (s *Service) Store() store.MemoryStores { return s.st }

// GetStore returns the tenant's memory store; another tenant's answers
// exactly like a missing one (store.ErrNotFound).
func (s *Service) GetStore(ctx context.Context, tenantID, storeID string) (*store.MemoryStore, error) {
	m, err := s.st.GetMemoryStore(ctx, storeID)
	if err != nil {
		return nil, err
	}
	if m.TenantID != tenantID {
		return nil, fmt.Errorf("memory store %q: %w", storeID, store.ErrNotFound)
	}
	return m, nil
}

// snapshotPage bounds one read of Snapshot.
const snapshotPage = 500

// Snapshot returns every live memory of the store in path order.
func (s *Service) Snapshot(ctx context.Context, tenantID, storeID string) ([]Entry, error) {
	if _, err := s.GetStore(ctx, tenantID, storeID); err != nil {
		return nil, err
	}
	out := []Entry{}
	after := ""
	for {
		ms, err := s.st.ListMemories(ctx, store.MemoryListParams{StoreID: storeID, AfterPath: after, Limit: snapshotPage})
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			out = append(out, Entry{Path: m.Path, Content: m.Content, MemoryID: m.ID, VersionID: m.VersionID})
		}
		if len(ms) < snapshotPage {
			return out, nil
		}
		after = ms[len(ms)-1].Path
	}
}

// Sync writes a session's changes to the store as new memory versions,
// each recorded with the session as its author, and returns the store's
// live memories afterwards.
//
// Optimistic concurrency never loses a write: BaseVersionID is not a gate
// for content. A changed file is written on top of whatever version is
// current, so when another writer changed the memory since this session's
// base, both writes are versions in the memory's history (theirs, then
// this one, each with its author) and the conflict is logged. A deletion is
// the one change a newer write beats: deleting a memory whose current
// version is not the session's base would take another writer's content
// out of the store unseen, so that memory is kept and the skipped deletion
// is logged (as the SDK's own environment worker does: "keeping the remote
// version"). A change that would change nothing (the content is already
// current; the file is already gone) records no version, which is what
// makes Sync idempotent: re-running it with the same changes after a crash
// writes only what the crash left unwritten. Each change is its own
// transaction, so a crash keeps every change written before it.
//
// Every change is checked before any is written: an invalid path or
// content refuses the whole sync (store.ErrInvalid / ErrTooLarge) naming
// it; use CheckPath and CheckContent to filter first. An archived store
// refuses with store.ErrConflict.
func (s *Service) Sync(ctx context.Context, tenantID, storeID string, actor Actor, changes []Change) ([]Entry, error) {
	m, err := s.GetStore(ctx, tenantID, storeID)
	if err != nil {
		return nil, err
	}
	if m.ArchivedAt != nil {
		return nil, fmt.Errorf("memory store %q is archived; archived memory stores take no writes: %w", storeID, store.ErrConflict)
	}
	if actor.SessionID == "" {
		return nil, fmt.Errorf("memory sync: the actor's SessionID is required: %w", store.ErrInvalid)
	}
	seen := make(map[string]bool, len(changes))
	for _, c := range changes {
		if err := CheckPath(c.Path); err != nil {
			return nil, err
		}
		if c.Content != nil {
			if err := CheckContent(*c.Content); err != nil {
				return nil, fmt.Errorf("memory path %q: %w", c.Path, err)
			}
		}
		if seen[c.Path] {
			return nil, fmt.Errorf("memory path %q appears twice in one sync: %w", c.Path, store.ErrInvalid)
		}
		seen[c.Path] = true
	}
	by := store.MemoryActor{Type: "session_actor", ID: actor.SessionID}
	for _, c := range changes {
		w := store.MemoryWrite{TenantID: tenantID, StoreID: storeID, Path: c.Path, Content: c.Content, Actor: by}
		cur := ""
		if c.Content == nil {
			// A stale deletion keeps the newer version: checked in the
			// write's own transaction.
			w.DeleteIfVersion = c.BaseVersionID
		} else if cur, err = s.current(ctx, storeID, c.Path); err != nil {
			return nil, err
		}
		if s.beforeWrite != nil {
			s.beforeWrite(storeID, c.Path)
		}
		kept, changed, err := s.st.PutMemoryAtPath(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("memory sync of %q: %w", c.Path, err)
		}
		switch {
		case c.Content == nil && !changed && kept != nil:
			s.log.Warn("memory deleted by a session but changed by another writer since it read it; keeping the newer version",
				"memory_store", storeID, "path", c.Path, "session", actor.SessionID, "base_version", c.BaseVersionID, "current_version", kept.VersionID)
		case c.Content != nil && changed && cur != c.BaseVersionID:
			// Only a log line: the write itself never depends on it.
			s.log.Warn("memory changed by another writer since this session read it; both versions are kept",
				"memory_store", storeID, "path", c.Path, "session", actor.SessionID, "base_version", c.BaseVersionID, "current_version", cur)
		}
	}
	return s.Snapshot(ctx, tenantID, storeID)
}

// current is the version id at path ("" when no memory is there).
func (s *Service) current(ctx context.Context, storeID, path string) (string, error) {
	// A path sorts before every longer path it prefixes, so the first
	// memory listed under it is the path itself when it exists.
	ms, err := s.st.ListMemories(ctx, store.MemoryListParams{StoreID: storeID, PathPrefix: path, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(ms) == 1 && ms[0].Path == path {
		return ms[0].VersionID, nil
	}
	return "", nil
}
