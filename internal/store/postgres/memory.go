package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const (
	memStoreCols   = `id, tenant_id, name, description, metadata, archived_at, created_at, updated_at`
	memoryCols     = `id, tenant_id, store_id, path, content, content_sha256, size_bytes, version_id, created_at, updated_at`
	memVersionCols = `id, tenant_id, store_id, memory_id, operation, path, content, content_sha256, size_bytes,
		actor_type, actor_id, redacted_at, redactor_type, redactor_id, created_at`
)

func scanMemStore(row pgx.Row) (*store.MemoryStore, error) {
	var (
		m  store.MemoryStore
		md []byte
	)
	if err := row.Scan(&m.ID, &m.TenantID, &m.Name, &m.Description, &md, &m.ArchivedAt, &m.CreatedAt, &m.UpdatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(md, &m.Metadata); err != nil {
		return nil, fmt.Errorf("memory store %s: metadata: %w", m.ID, err)
	}
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.ArchivedAt = utcPtr(m.ArchivedAt)
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return &m, nil
}

func scanMemory(row pgx.Row) (*store.Memory, error) {
	var m store.Memory
	if err := row.Scan(&m.ID, &m.TenantID, &m.StoreID, &m.Path, &m.Content, &m.ContentSHA256, &m.SizeBytes, &m.VersionID,
		&m.CreatedAt, &m.UpdatedAt); err != nil {
		return nil, err
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return &m, nil
}

func scanMemVersion(row pgx.Row) (*store.MemoryVersion, error) {
	var (
		v                  store.MemoryVersion
		path, content, sha *string
		size               *int64
	)
	if err := row.Scan(&v.ID, &v.TenantID, &v.StoreID, &v.MemoryID, &v.Operation, &path, &content, &sha, &size,
		&v.CreatedBy.Type, &v.CreatedBy.ID, &v.RedactedAt, &v.RedactedBy.Type, &v.RedactedBy.ID, &v.CreatedAt); err != nil {
		return nil, err
	}
	if path != nil {
		v.Path = *path
	}
	if content != nil {
		v.Content = *content
	}
	if sha != nil {
		v.ContentSHA256 = *sha
	}
	if size != nil {
		v.SizeBytes = *size
	}
	v.RedactedAt = utcPtr(v.RedactedAt)
	v.CreatedAt = v.CreatedAt.UTC()
	return &v, nil
}

func metadataJSON(m map[string]string) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// CreateMemoryStore implements store.MemoryStores.
func (s *Store) CreateMemoryStore(ctx context.Context, m *store.MemoryStore) (*store.MemoryStore, error) {
	in := *m
	if in.ID == "" {
		in.ID = ids.New("memstore")
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var out *store.MemoryStore
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanMemStore(tx.QueryRow(ctx, `INSERT INTO memory_stores (`+memStoreCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+memStoreCols,
			in.ID, in.TenantID, in.Name, in.Description, metadataJSON(in.Metadata), in.ArchivedAt, in.CreatedAt, in.UpdatedAt))
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("create memory store %s: %w", in.ID, store.ErrAlreadyExists)
			}
			return mapErr("create memory store "+in.ID, err)
		}
		return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookMemoryStoreCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetMemoryStore implements store.MemoryStores.
func (s *Store) GetMemoryStore(ctx context.Context, id string) (*store.MemoryStore, error) {
	m, err := scanMemStore(s.pool.QueryRow(ctx, `SELECT `+memStoreCols+` FROM memory_stores WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("memory store "+id, err)
	}
	return m, nil
}

// UpdateMemoryStore implements store.MemoryStores.
func (s *Store) UpdateMemoryStore(ctx context.Context, m *store.MemoryStore) (*store.MemoryStore, error) {
	out, err := scanMemStore(s.pool.QueryRow(ctx, `UPDATE memory_stores SET name = $2, description = $3, metadata = $4,
		updated_at = $5 WHERE id = $1 AND archived_at IS NULL RETURNING `+memStoreCols,
		m.ID, m.Name, m.Description, metadataJSON(m.Metadata), s.clock()))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr("update memory store "+m.ID, err)
	}
	return nil, s.missingOrArchived(ctx, "memory_stores", "memory store", m.ID)
}

// ListMemoryStores implements store.MemoryStores.
func (s *Store) ListMemoryStores(ctx context.Context, p store.ListResourcesParams) ([]*store.MemoryStore, error) {
	where, tail, page := resourcePage(p, 3)
	rows, err := s.pool.Query(ctx, `SELECT `+memStoreCols+` FROM memory_stores
		WHERE tenant_id = $1 AND ($2::boolean OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, mapErr("list memory stores", err)
	}
	return collect(rows, "memory stores", scanMemStore)
}

// ArchiveMemoryStore implements store.MemoryStores.
func (s *Store) ArchiveMemoryStore(ctx context.Context, id string, at time.Time) (*store.MemoryStore, error) {
	if at.IsZero() {
		at = s.clock()
	}
	var out *store.MemoryStore
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var live bool
		if err := tx.QueryRow(ctx, `SELECT archived_at IS NULL FROM memory_stores WHERE id = $1 FOR UPDATE`, id).Scan(&live); err != nil {
			return mapErr("archive memory store "+id, err)
		}
		m, err := scanMemStore(tx.QueryRow(ctx, `UPDATE memory_stores SET
			updated_at = CASE WHEN archived_at IS NULL THEN $2 ELSE updated_at END,
			archived_at = COALESCE(archived_at, $2)
			WHERE id = $1 RETURNING `+memStoreCols, id, at))
		if err != nil {
			return mapErr("archive memory store "+id, err)
		}
		out = m
		if !live {
			return nil // archived before: announced then
		}
		return s.lifecycleWebhook(ctx, tx, m.TenantID, m.ID, store.WebhookMemoryStoreArchived, at)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteMemoryStore implements store.MemoryStores (memories and versions
// go by cascade).
func (s *Store) DeleteMemoryStore(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var tenant string
		err := tx.QueryRow(ctx, `DELETE FROM memory_stores WHERE id = $1 RETURNING tenant_id`, id).Scan(&tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("memory store %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("delete memory store "+id, err)
		}
		return s.lifecycleWebhook(ctx, tx, tenant, id, store.WebhookMemoryStoreDeleted, s.clock())
	})
}

// lockWritableStore checks that the store exists and takes writes, and
// holds its row lock for the transaction: every write of a store's
// memories is serialised on it, so a path check and the write it guards
// are never interleaved with another writer's.
func lockWritableStore(ctx context.Context, tx pgx.Tx, id string) error {
	var archived *time.Time
	err := tx.QueryRow(ctx, `SELECT archived_at FROM memory_stores WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&archived)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("memory store %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return mapErr("read memory store "+id, err)
	}
	if archived != nil {
		return fmt.Errorf("memory store %s is archived; archived memory stores take no writes: %w", id, store.ErrConflict)
	}
	return nil
}

func appendVersion(ctx context.Context, tx pgx.Tx, m *store.Memory, op string, actor store.MemoryActor, at time.Time) (string, error) {
	id := ids.New("memver")
	var (
		content, sha *string
		size         *int64
	)
	if op != store.MemoryDeleted {
		content, sha, size = &m.Content, &m.ContentSHA256, &m.SizeBytes
	}
	if _, err := tx.Exec(ctx, `INSERT INTO memory_versions (`+memVersionCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, '', '', $12)`,
		id, m.TenantID, m.StoreID, m.ID, op, m.Path, content, sha, size, actor.Type, actor.ID, at); err != nil {
		return "", mapErr("record version of memory "+m.ID, err)
	}
	return id, nil
}

func memoryAt(ctx context.Context, tx pgx.Tx, storeID, path string) (*store.Memory, error) {
	m, err := scanMemory(tx.QueryRow(ctx, `SELECT `+memoryCols+` FROM memories WHERE store_id = $1 AND path = $2`, storeID, path))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr("read memory at "+path, err)
	}
	return m, nil
}

func (s *Store) insertMemory(ctx context.Context, tx pgx.Tx, w store.MemoryWrite) (*store.Memory, error) {
	now := s.clock()
	m := &store.Memory{ID: ids.New("mem"), TenantID: w.TenantID, StoreID: w.StoreID, Path: w.Path, Content: *w.Content,
		CreatedAt: now, UpdatedAt: now}
	m.ContentSHA256, m.SizeBytes = store.MemoryDigest(m.Content)
	vid, err := appendVersion(ctx, tx, m, store.MemoryCreated, w.Actor, now)
	if err != nil {
		return nil, err
	}
	m.VersionID = vid
	if _, err := tx.Exec(ctx, `INSERT INTO memories (`+memoryCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		m.ID, m.TenantID, m.StoreID, m.Path, m.Content, m.ContentSHA256, m.SizeBytes, m.VersionID, now, now); err != nil {
		return nil, mapErr("create memory at "+m.Path, err)
	}
	return m, nil
}

func (s *Store) modifyMemory(ctx context.Context, tx pgx.Tx, cur *store.Memory, w store.MemoryWrite) (*store.Memory, bool, error) {
	next := *cur
	if w.Path != "" {
		next.Path = w.Path
	}
	if w.Content != nil {
		next.Content = *w.Content
		next.ContentSHA256, next.SizeBytes = store.MemoryDigest(next.Content)
	}
	if next.Path == cur.Path && next.ContentSHA256 == cur.ContentSHA256 {
		return cur, false, nil
	}
	if next.Path != cur.Path {
		if other, err := memoryAt(ctx, tx, cur.StoreID, next.Path); err != nil {
			return nil, false, err
		} else if other != nil {
			return nil, false, fmt.Errorf("memory path %q is taken by memory %s: %w", next.Path, other.ID, store.ErrAlreadyExists)
		}
	}
	now := s.clock()
	next.UpdatedAt = now
	vid, err := appendVersion(ctx, tx, &next, store.MemoryModified, w.Actor, now)
	if err != nil {
		return nil, false, err
	}
	next.VersionID = vid
	if _, err := tx.Exec(ctx, `UPDATE memories SET path = $2, content = $3, content_sha256 = $4, size_bytes = $5,
		version_id = $6, updated_at = $7 WHERE id = $1`,
		next.ID, next.Path, next.Content, next.ContentSHA256, next.SizeBytes, next.VersionID, now); err != nil {
		return nil, false, mapErr("update memory "+next.ID, err)
	}
	return &next, true, nil
}

func (s *Store) removeMemory(ctx context.Context, tx pgx.Tx, cur *store.Memory, actor store.MemoryActor) error {
	if _, err := appendVersion(ctx, tx, cur, store.MemoryDeleted, actor, s.clock()); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM memories WHERE id = $1`, cur.ID); err != nil {
		return mapErr("delete memory "+cur.ID, err)
	}
	return nil
}

func expectDigest(cur *store.Memory, want string) error {
	if want != "" && cur.ContentSHA256 != want {
		return fmt.Errorf("memory %s: content_sha256 is %s, precondition expected %s: %w", cur.ID, cur.ContentSHA256, want, store.ErrVersionMismatch)
	}
	return nil
}

func memoryByID(ctx context.Context, tx pgx.Tx, storeID, id string) (*store.Memory, error) {
	m, err := scanMemory(tx.QueryRow(ctx, `SELECT `+memoryCols+` FROM memories WHERE id = $1 AND store_id = $2`, id, storeID))
	if err != nil {
		return nil, mapErr("memory "+id, err)
	}
	return m, nil
}

// CreateMemory implements store.MemoryStores.
func (s *Store) CreateMemory(ctx context.Context, w store.MemoryWrite) (*store.Memory, error) {
	if w.Content == nil || w.Path == "" {
		return nil, fmt.Errorf("create memory: Path and Content are required: %w", store.ErrInvalid)
	}
	var out *store.Memory
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockWritableStore(ctx, tx, w.StoreID); err != nil {
			return err
		}
		if cur, err := memoryAt(ctx, tx, w.StoreID, w.Path); err != nil {
			return err
		} else if cur != nil {
			return fmt.Errorf("memory path %q is taken by memory %s: %w", w.Path, cur.ID, store.ErrAlreadyExists)
		}
		m, err := s.insertMemory(ctx, tx, w)
		out = m
		return err
	})
	return out, err
}

// GetMemory implements store.MemoryStores.
func (s *Store) GetMemory(ctx context.Context, id string) (*store.Memory, error) {
	m, err := scanMemory(s.pool.QueryRow(ctx, `SELECT `+memoryCols+` FROM memories WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("memory "+id, err)
	}
	return m, nil
}

// UpdateMemory implements store.MemoryStores.
func (s *Store) UpdateMemory(ctx context.Context, w store.MemoryWrite) (*store.Memory, error) {
	var out *store.Memory
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockWritableStore(ctx, tx, w.StoreID); err != nil {
			return err
		}
		cur, err := memoryByID(ctx, tx, w.StoreID, w.ID)
		if err != nil {
			return err
		}
		if err := expectDigest(cur, w.ExpectSHA256); err != nil {
			return err
		}
		out, _, err = s.modifyMemory(ctx, tx, cur, w)
		return err
	})
	return out, err
}

// DeleteMemory implements store.MemoryStores.
func (s *Store) DeleteMemory(ctx context.Context, w store.MemoryWrite) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockWritableStore(ctx, tx, w.StoreID); err != nil {
			return err
		}
		cur, err := memoryByID(ctx, tx, w.StoreID, w.ID)
		if err != nil {
			return err
		}
		if err := expectDigest(cur, w.ExpectSHA256); err != nil {
			return err
		}
		return s.removeMemory(ctx, tx, cur, w.Actor)
	})
}

// PutMemoryAtPath implements store.MemoryStores.
func (s *Store) PutMemoryAtPath(ctx context.Context, w store.MemoryWrite) (*store.Memory, bool, error) {
	var (
		out     *store.Memory
		changed bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out, changed = nil, false
		if err := lockWritableStore(ctx, tx, w.StoreID); err != nil {
			return err
		}
		cur, err := memoryAt(ctx, tx, w.StoreID, w.Path)
		if err != nil {
			return err
		}
		switch {
		case cur == nil && w.Content == nil:
			return nil
		case cur == nil:
			out, err = s.insertMemory(ctx, tx, w)
			changed = err == nil
			return err
		case w.Content == nil && w.DeleteIfVersion != "" && cur.VersionID != w.DeleteIfVersion:
			out = cur // changed since the deleter read it: the newer version stays
			return nil
		case w.Content == nil:
			changed = true
			return s.removeMemory(ctx, tx, cur, w.Actor)
		default:
			out, changed, err = s.modifyMemory(ctx, tx, cur, store.MemoryWrite{Content: w.Content, Actor: w.Actor})
			return err
		}
	})
	return out, changed, err
}

// ListMemories implements store.MemoryStores.
func (s *Store) ListMemories(ctx context.Context, p store.MemoryListParams) ([]*store.Memory, error) {
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+memoryCols+` FROM memories
		WHERE store_id = $1 AND path >= $2 AND left(path, length($2)) = $2 AND path > $3 ORDER BY path LIMIT $4`,
		p.StoreID, p.PathPrefix, p.AfterPath, limit)
	if err != nil {
		return nil, mapErr("list memories", err)
	}
	return collect(rows, "memories", scanMemory)
}

// GetMemoryVersion implements store.MemoryStores.
func (s *Store) GetMemoryVersion(ctx context.Context, id string) (*store.MemoryVersion, error) {
	v, err := scanMemVersion(s.pool.QueryRow(ctx, `SELECT `+memVersionCols+` FROM memory_versions WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("memory version "+id, err)
	}
	return v, nil
}

// ListMemoryVersions implements store.MemoryStores.
func (s *Store) ListMemoryVersions(ctx context.Context, p store.MemoryVersionListParams) ([]*store.MemoryVersion, error) {
	var (
		where = []string{"store_id = $1"}
		args  = []any{p.StoreID}
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if p.MemoryID != "" {
		add("memory_id = $%d", p.MemoryID)
	}
	if p.Operation != "" {
		add("operation = $%d", p.Operation)
	}
	if p.Actor.Type != "" {
		add("actor_type = $%d", p.Actor.Type)
		add("actor_id = $%d", p.Actor.ID)
	}
	if p.BeforeID != "" {
		add("id < $%d", p.BeforeID)
	}
	if !p.CreatedGTE.IsZero() {
		add("created_at >= $%d", p.CreatedGTE)
	}
	if !p.CreatedLTE.IsZero() {
		add("created_at <= $%d", p.CreatedLTE)
	}
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	args = append(args, limit)
	rows, err := s.pool.Query(ctx, `SELECT `+memVersionCols+` FROM memory_versions WHERE `+
		strings.Join(where, " AND ")+fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, mapErr("list memory versions", err)
	}
	return collect(rows, "memory versions", scanMemVersion)
}

// RedactMemoryVersion implements store.MemoryStores.
func (s *Store) RedactMemoryVersion(ctx context.Context, id string, by store.MemoryActor, at time.Time) (*store.MemoryVersion, error) {
	if at.IsZero() {
		at = s.clock()
	}
	var out *store.MemoryVersion
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var storeID string
		if err := tx.QueryRow(ctx, `SELECT store_id FROM memory_versions WHERE id = $1`, id).Scan(&storeID); err != nil {
			return mapErr("memory version "+id, err)
		}
		// The store lock orders this against a write that would make the
		// version current (none can: new writes make new versions) and
		// against one that moves the memory off it.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM memory_stores WHERE id = $1 FOR NO KEY UPDATE`, storeID); err != nil {
			return mapErr("lock memory store "+storeID, err)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM memories WHERE id = (SELECT memory_id FROM memory_versions WHERE id = $1) AND version_id = $1`, id).Scan(&n); err != nil {
			return mapErr("read memory of version "+id, err)
		}
		if n > 0 {
			return fmt.Errorf("memory version %s holds its memory's current content; update or delete the memory first, then redact this version: %w", id, store.ErrConflict)
		}
		v, err := scanMemVersion(tx.QueryRow(ctx, `UPDATE memory_versions SET
			path = NULL, content = NULL, content_sha256 = NULL, size_bytes = NULL,
			redactor_type = CASE WHEN redacted_at IS NULL THEN $2 ELSE redactor_type END,
			redactor_id = CASE WHEN redacted_at IS NULL THEN $3 ELSE redactor_id END,
			redacted_at = COALESCE(redacted_at, $4)
			WHERE id = $1 RETURNING `+memVersionCols, id, by.Type, by.ID, at))
		if err != nil {
			return mapErr("redact memory version "+id, err)
		}
		out = v
		return nil
	})
	return out, err
}
