package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const (
	memStoreCols   = `id, tenant_id, name, description, metadata, archived_at, created_at, updated_at`
	memoryCols     = `id, tenant_id, store_id, path, content, content_sha256, size_bytes, version_id, created_at, updated_at`
	memVersionCols = `id, tenant_id, store_id, memory_id, operation, path, content, content_sha256, size_bytes,
		actor_type, actor_id, redacted_at, redactor_type, redactor_id, created_at`
)

func scanMemStore(r scanner) (*store.MemoryStore, error) {
	var (
		m                store.MemoryStore
		md               string
		archived         sql.NullInt64
		created, updated int64
	)
	if err := r.Scan(&m.ID, &m.TenantID, &m.Name, &m.Description, &md, &archived, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(md), &m.Metadata); err != nil {
		return nil, fmt.Errorf("memory store %s: metadata: %w", m.ID, err)
	}
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.ArchivedAt = timePtr(archived)
	m.CreatedAt, m.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &m, nil
}

func scanMemory(r scanner) (*store.Memory, error) {
	var (
		m                store.Memory
		created, updated int64
	)
	if err := r.Scan(&m.ID, &m.TenantID, &m.StoreID, &m.Path, &m.Content, &m.ContentSHA256, &m.SizeBytes, &m.VersionID,
		&created, &updated); err != nil {
		return nil, err
	}
	m.CreatedAt, m.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &m, nil
}

func scanMemVersion(r scanner) (*store.MemoryVersion, error) {
	var (
		v                  store.MemoryVersion
		path, content, sha sql.NullString
		size, redacted     sql.NullInt64
		created            int64
	)
	if err := r.Scan(&v.ID, &v.TenantID, &v.StoreID, &v.MemoryID, &v.Operation, &path, &content, &sha, &size,
		&v.CreatedBy.Type, &v.CreatedBy.ID, &redacted, &v.RedactedBy.Type, &v.RedactedBy.ID, &created); err != nil {
		return nil, err
	}
	v.Path, v.Content, v.ContentSHA256, v.SizeBytes = path.String, content.String, sha.String, size.Int64
	v.RedactedAt = timePtr(redacted)
	v.CreatedAt = fromMicros(created)
	return &v, nil
}

// CreateMemoryStore implements store.MemoryStores.
func (s *Store) CreateMemoryStore(ctx context.Context, m *store.MemoryStore) (*store.MemoryStore, error) {
	in := *m
	if in.ID == "" {
		in.ID = ids.New("memstore")
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var out *store.MemoryStore
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanMemStore(tx.QueryRowContext(ctx, `INSERT INTO memory_stores (`+memStoreCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING `+memStoreCols,
			in.ID, in.TenantID, in.Name, in.Description, metadataJSON(in.Metadata), nullMicros(in.ArchivedAt),
			micros(in.CreatedAt), micros(in.UpdatedAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("memory store %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create memory store %q: %w", in.ID, err)
		}
		return s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookMemoryStoreCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func metadataJSON(m map[string]string) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// GetMemoryStore implements store.MemoryStores.
func (s *Store) GetMemoryStore(ctx context.Context, id string) (*store.MemoryStore, error) {
	m, err := scanMemStore(s.read.QueryRowContext(ctx, `SELECT `+memStoreCols+` FROM memory_stores WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("memory store %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get memory store %q: %w", id, err)
	}
	return m, nil
}

// UpdateMemoryStore implements store.MemoryStores.
func (s *Store) UpdateMemoryStore(ctx context.Context, m *store.MemoryStore) (*store.MemoryStore, error) {
	var out *store.MemoryStore
	err := s.inTx(ctx, func(tx *wtx) error {
		row, err := scanMemStore(tx.QueryRowContext(ctx, `UPDATE memory_stores SET name = ?, description = ?, metadata = ?,
			updated_at = ? WHERE id = ? AND archived_at IS NULL RETURNING `+memStoreCols,
			m.Name, m.Description, metadataJSON(m.Metadata), micros(s.timestamp()), m.ID))
		if err == nil {
			out = row
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: update memory store %q: %w", m.ID, err)
		}
		return s.missingOrArchived(ctx, tx, "memory_stores", "memory store", m.ID)
	})
	return out, err
}

// ListMemoryStores implements store.MemoryStores.
func (s *Store) ListMemoryStores(ctx context.Context, p store.ListResourcesParams) ([]*store.MemoryStore, error) {
	where, tail, page := resourcePage(p, 3)
	rows, err := s.read.QueryContext(ctx, `SELECT `+memStoreCols+` FROM memory_stores
		WHERE tenant_id = ?1 AND (?2 OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list memory stores: %w", err)
	}
	return collect(rows, "memory stores", scanMemStore)
}

// ArchiveMemoryStore implements store.MemoryStores.
func (s *Store) ArchiveMemoryStore(ctx context.Context, id string, at time.Time) (*store.MemoryStore, error) {
	if at.IsZero() {
		at = s.timestamp()
	}
	var out *store.MemoryStore
	err := s.inTx(ctx, func(tx *wtx) error {
		var live bool
		if err := tx.QueryRowContext(ctx, `SELECT archived_at IS NULL FROM memory_stores WHERE id = ?`, id).Scan(&live); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("memory store %q: %w", id, store.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("sqlite: read memory store %q: %w", id, err)
		}
		m, err := scanMemStore(tx.QueryRowContext(ctx, `UPDATE memory_stores SET
			updated_at = CASE WHEN archived_at IS NULL THEN ?1 ELSE updated_at END,
			archived_at = COALESCE(archived_at, ?1)
			WHERE id = ?2 RETURNING `+memStoreCols, micros(at), id))
		if err != nil {
			return fmt.Errorf("sqlite: archive memory store %q: %w", id, err)
		}
		out = m
		if !live {
			return nil // archived before: announced then
		}
		return s.lifecycleWebhookTx(ctx, tx, m.TenantID, m.ID, store.WebhookMemoryStoreArchived, at)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteMemoryStore implements store.MemoryStores (memories and versions
// go by cascade).
func (s *Store) DeleteMemoryStore(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		var tenant string
		err := tx.QueryRowContext(ctx, `DELETE FROM memory_stores WHERE id = ? RETURNING tenant_id`, id).Scan(&tenant)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("memory store %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: delete memory store %q: %w", id, err)
		}
		return s.lifecycleWebhookTx(ctx, tx, tenant, id, store.WebhookMemoryStoreDeleted, s.timestamp())
	})
}

// writableStore checks, inside a write, that the store exists and takes
// writes.
func writableStore(ctx context.Context, tx *wtx, id string) error {
	var archived sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT archived_at FROM memory_stores WHERE id = ?`, id).Scan(&archived)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("memory store %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: read memory store %q: %w", id, err)
	}
	if archived.Valid {
		return fmt.Errorf("memory store %q is archived; archived memory stores take no writes: %w", id, store.ErrConflict)
	}
	return nil
}

// appendVersion records one version of m (its state after the write; for
// a delete, only its path).
func appendVersion(ctx context.Context, tx *wtx, m *store.Memory, op string, actor store.MemoryActor, at time.Time) (string, error) {
	id := ids.New("memver")
	var content, sha, size any
	if op != store.MemoryDeleted {
		content, sha, size = m.Content, m.ContentSHA256, m.SizeBytes
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO memory_versions (`+memVersionCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, '', '', ?)`,
		id, m.TenantID, m.StoreID, m.ID, op, m.Path, content, sha, size, actor.Type, actor.ID, micros(at)); err != nil {
		return "", fmt.Errorf("sqlite: record version of memory %q: %w", m.ID, err)
	}
	return id, nil
}

func memoryAt(ctx context.Context, tx *wtx, storeID, path string) (*store.Memory, error) {
	m, err := scanMemory(tx.QueryRowContext(ctx, `SELECT `+memoryCols+` FROM memories WHERE store_id = ? AND path = ?`, storeID, path))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: read memory at %q: %w", path, err)
	}
	return m, nil
}

func (s *Store) insertMemory(ctx context.Context, tx *wtx, w store.MemoryWrite) (*store.Memory, error) {
	now := s.timestamp()
	m := &store.Memory{ID: ids.New("mem"), TenantID: w.TenantID, StoreID: w.StoreID, Path: w.Path, Content: *w.Content,
		CreatedAt: now, UpdatedAt: now}
	m.ContentSHA256, m.SizeBytes = store.MemoryDigest(m.Content)
	vid, err := appendVersion(ctx, tx, m, store.MemoryCreated, w.Actor, now)
	if err != nil {
		return nil, err
	}
	m.VersionID = vid
	if _, err := tx.ExecContext(ctx, `INSERT INTO memories (`+memoryCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.TenantID, m.StoreID, m.Path, m.Content, m.ContentSHA256, m.SizeBytes, m.VersionID, micros(now), micros(now)); err != nil {
		return nil, fmt.Errorf("sqlite: create memory at %q: %w", m.Path, err)
	}
	return m, nil
}

// modifyMemory writes cur with the new path/content of w; no change → cur.
func (s *Store) modifyMemory(ctx context.Context, tx *wtx, cur *store.Memory, w store.MemoryWrite) (*store.Memory, bool, error) {
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
	now := s.timestamp()
	next.UpdatedAt = now
	vid, err := appendVersion(ctx, tx, &next, store.MemoryModified, w.Actor, now)
	if err != nil {
		return nil, false, err
	}
	next.VersionID = vid
	if _, err := tx.ExecContext(ctx, `UPDATE memories SET path = ?, content = ?, content_sha256 = ?, size_bytes = ?,
		version_id = ?, updated_at = ? WHERE id = ?`,
		next.Path, next.Content, next.ContentSHA256, next.SizeBytes, next.VersionID, micros(now), next.ID); err != nil {
		return nil, false, fmt.Errorf("sqlite: update memory %q: %w", next.ID, err)
	}
	return &next, true, nil
}

func (s *Store) removeMemory(ctx context.Context, tx *wtx, cur *store.Memory, actor store.MemoryActor) error {
	if _, err := appendVersion(ctx, tx, cur, store.MemoryDeleted, actor, s.timestamp()); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM memories WHERE id = ?`, cur.ID); err != nil {
		return fmt.Errorf("sqlite: delete memory %q: %w", cur.ID, err)
	}
	return nil
}

func expectDigest(cur *store.Memory, want string) error {
	if want != "" && cur.ContentSHA256 != want {
		return fmt.Errorf("memory %s: content_sha256 is %s, precondition expected %s: %w", cur.ID, cur.ContentSHA256, want, store.ErrVersionMismatch)
	}
	return nil
}

// CreateMemory implements store.MemoryStores.
func (s *Store) CreateMemory(ctx context.Context, w store.MemoryWrite) (*store.Memory, error) {
	if w.Content == nil || w.Path == "" {
		return nil, fmt.Errorf("create memory: Path and Content are required: %w", store.ErrInvalid)
	}
	var out *store.Memory
	err := s.inTx(ctx, func(tx *wtx) error {
		if err := writableStore(ctx, tx, w.StoreID); err != nil {
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
	m, err := scanMemory(s.read.QueryRowContext(ctx, `SELECT `+memoryCols+` FROM memories WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("memory %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get memory %q: %w", id, err)
	}
	return m, nil
}

func memoryByID(ctx context.Context, tx *wtx, storeID, id string) (*store.Memory, error) {
	m, err := scanMemory(tx.QueryRowContext(ctx, `SELECT `+memoryCols+` FROM memories WHERE id = ? AND store_id = ?`, id, storeID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("memory %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: read memory %q: %w", id, err)
	}
	return m, nil
}

// UpdateMemory implements store.MemoryStores.
func (s *Store) UpdateMemory(ctx context.Context, w store.MemoryWrite) (*store.Memory, error) {
	var out *store.Memory
	err := s.inTx(ctx, func(tx *wtx) error {
		if err := writableStore(ctx, tx, w.StoreID); err != nil {
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
	return s.inTx(ctx, func(tx *wtx) error {
		if err := writableStore(ctx, tx, w.StoreID); err != nil {
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
	err := s.inTx(ctx, func(tx *wtx) error {
		if err := writableStore(ctx, tx, w.StoreID); err != nil {
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

// ListMemories implements store.MemoryStores. The prefix is matched with
// substr, not LIKE, so % and _ in paths are plain characters.
func (s *Store) ListMemories(ctx context.Context, p store.MemoryListParams) ([]*store.Memory, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+memoryCols+` FROM memories
		WHERE store_id = ?1 AND path >= ?2 AND substr(path, 1, length(?2)) = ?2 AND path > ?3 ORDER BY path LIMIT ?4`,
		p.StoreID, p.PathPrefix, p.AfterPath, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list memories: %w", err)
	}
	return collect(rows, "memories", scanMemory)
}

// GetMemoryVersion implements store.MemoryStores.
func (s *Store) GetMemoryVersion(ctx context.Context, id string) (*store.MemoryVersion, error) {
	v, err := scanMemVersion(s.read.QueryRowContext(ctx, `SELECT `+memVersionCols+` FROM memory_versions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("memory version %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get memory version %q: %w", id, err)
	}
	return v, nil
}

// ListMemoryVersions implements store.MemoryStores.
func (s *Store) ListMemoryVersions(ctx context.Context, p store.MemoryVersionListParams) ([]*store.MemoryVersion, error) {
	var (
		where = []string{"store_id = ?"}
		args  = []any{p.StoreID}
	)
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if p.MemoryID != "" {
		add("memory_id = ?", p.MemoryID)
	}
	if p.Operation != "" {
		add("operation = ?", p.Operation)
	}
	if p.Actor.Type != "" {
		add("actor_type = ?", p.Actor.Type)
		add("actor_id = ?", p.Actor.ID)
	}
	if p.BeforeID != "" {
		add("id < ?", p.BeforeID)
	}
	if !p.CreatedGTE.IsZero() {
		add("created_at >= ?", micros(p.CreatedGTE))
	}
	if !p.CreatedLTE.IsZero() {
		add("created_at <= ?", micros(p.CreatedLTE))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+memVersionCols+` FROM memory_versions WHERE `+
		strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list memory versions: %w", err)
	}
	return collect(rows, "memory versions", scanMemVersion)
}

// RedactMemoryVersion implements store.MemoryStores.
func (s *Store) RedactMemoryVersion(ctx context.Context, id string, by store.MemoryActor, at time.Time) (*store.MemoryVersion, error) {
	if at.IsZero() {
		at = s.timestamp()
	}
	var out *store.MemoryVersion
	err := s.inTx(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM memories WHERE id = (SELECT memory_id FROM memory_versions WHERE id = ?1) AND version_id = ?1`, id).Scan(&n); err != nil {
			return fmt.Errorf("sqlite: read memory of version %q: %w", id, err)
		}
		if n > 0 {
			return fmt.Errorf("memory version %q holds its memory's current content; update or delete the memory first, then redact this version: %w", id, store.ErrConflict)
		}
		v, err := scanMemVersion(tx.QueryRowContext(ctx, `UPDATE memory_versions SET
			path = NULL, content = NULL, content_sha256 = NULL, size_bytes = NULL,
			redactor_type = CASE WHEN redacted_at IS NULL THEN ?1 ELSE redactor_type END,
			redactor_id = CASE WHEN redacted_at IS NULL THEN ?2 ELSE redactor_id END,
			redacted_at = COALESCE(redacted_at, ?3)
			WHERE id = ?4 RETURNING `+memVersionCols, by.Type, by.ID, micros(at), id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("memory version %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: redact memory version %q: %w", id, err)
		}
		out = v
		return nil
	})
	return out, err
}
