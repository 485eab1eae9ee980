package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// The latest version is read from the versions: versions are fixed-width
// microsecond ids, so the greatest sorts last.
const (
	skillCols = `id, tenant_id, display_name,
		COALESCE((SELECT max(v.version) FROM skill_versions v WHERE v.skill_id = skills.id), ''),
		created_at, updated_at`
	skillVersionCols = `skill_id, version, tenant_id, name, description, directory, blob_key, sha256, size, files, created_at`
)

func scanSkill(r scanner) (*store.Skill, error) {
	var (
		s                store.Skill
		created, updated int64
	)
	if err := r.Scan(&s.ID, &s.TenantID, &s.DisplayName, &s.LatestVersion, &created, &updated); err != nil {
		return nil, err
	}
	s.CreatedAt, s.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &s, nil
}

func scanSkillVersion(r scanner) (*store.SkillVersion, error) {
	var (
		v       store.SkillVersion
		created int64
	)
	if err := r.Scan(&v.SkillID, &v.Version, &v.TenantID, &v.Name, &v.Description, &v.Directory,
		&v.BlobKey, &v.SHA256, &v.Size, &v.Files, &created); err != nil {
		return nil, err
	}
	v.CreatedAt = fromMicros(created)
	return &v, nil
}

// insertSkillVersion adds v in tx; an existing (skill, version) →
// ErrAlreadyExists.
func (s *Store) insertSkillVersion(ctx context.Context, tx *wtx, v store.SkillVersion) (*store.SkillVersion, error) {
	if v.CreatedAt.IsZero() {
		v.CreatedAt = s.timestamp()
	}
	out, err := scanSkillVersion(tx.QueryRowContext(ctx, `INSERT INTO skill_versions
		(`+skillVersionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING RETURNING `+skillVersionCols,
		v.SkillID, v.Version, v.TenantID, v.Name, v.Description, v.Directory, v.BlobKey, v.SHA256, v.Size, v.Files,
		micros(v.CreatedAt)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("skill %q version %q: %w", v.SkillID, v.Version, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create skill %q version %q: %w", v.SkillID, v.Version, err)
	}
	return out, nil
}

// CreateSkill implements store.SkillStore.
func (s *Store) CreateSkill(ctx context.Context, sk *store.Skill, first *store.SkillVersion) (*store.Skill, *store.SkillVersion, error) {
	in, v := *sk, *first
	if in.ID == "" {
		return nil, nil, fmt.Errorf("skill: ID is required: %w", store.ErrInvalid)
	}
	v.SkillID, v.TenantID = in.ID, in.TenantID
	if err := v.Check(); err != nil {
		return nil, nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	if v.CreatedAt.IsZero() {
		v.CreatedAt = in.CreatedAt
	}
	var (
		outS *store.Skill
		outV *store.SkillVersion
	)
	err := s.inTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO skills (id, tenant_id, display_name, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			in.ID, in.TenantID, in.DisplayName, micros(in.CreatedAt), micros(in.UpdatedAt))
		if err != nil {
			return fmt.Errorf("sqlite: create skill %q: %w", in.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("skill %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if outV, err = s.insertSkillVersion(ctx, tx, v); err != nil {
			return err
		}
		outS, err = scanSkill(tx.QueryRowContext(ctx, `SELECT `+skillCols+` FROM skills WHERE id = ?`, in.ID))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return outS, outV, nil
}

// GetSkill implements store.SkillStore.
func (s *Store) GetSkill(ctx context.Context, id string) (*store.Skill, error) {
	out, err := scanSkill(s.read.QueryRowContext(ctx, `SELECT `+skillCols+` FROM skills WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("skill %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get skill %q: %w", id, err)
	}
	return out, nil
}

// ListSkills implements store.SkillStore.
func (s *Store) ListSkills(ctx context.Context, p store.ListResourcesParams) ([]*store.Skill, error) {
	where, tail, page := resourcePage(p, 2)
	rows, err := s.read.QueryContext(ctx, `SELECT `+skillCols+` FROM skills WHERE tenant_id = ?1`+where+tail,
		append([]any{p.TenantID}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list skills: %w", err)
	}
	return collect(rows, "skills", scanSkill)
}

// DeleteSkill implements store.SkillStore (versions go by cascade).
func (s *Store) DeleteSkill(ctx context.Context, id string) ([]*store.SkillVersion, error) {
	var out []*store.SkillVersion
	err := s.inTx(ctx, func(tx *wtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+skillVersionCols+` FROM skill_versions WHERE skill_id = ? ORDER BY version`, id)
		if err != nil {
			return fmt.Errorf("sqlite: read the versions of skill %q: %w", id, err)
		}
		if out, err = collect(rows, "skill versions", scanSkillVersion); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM skills WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("sqlite: delete skill %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("skill %q: %w", id, store.ErrNotFound)
		}
		return nil
	})
	return out, err
}

// CreateSkillVersion implements store.SkillStore.
func (s *Store) CreateSkillVersion(ctx context.Context, v *store.SkillVersion) (*store.SkillVersion, error) {
	in := *v
	if err := in.Check(); err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	var out *store.SkillVersion
	err := s.inTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE skills SET updated_at = max(updated_at, ?) WHERE id = ?`, micros(in.CreatedAt), in.SkillID)
		if err != nil {
			return fmt.Errorf("sqlite: touch skill %q: %w", in.SkillID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("skill %q: %w", in.SkillID, store.ErrNotFound)
		}
		out, err = s.insertSkillVersion(ctx, tx, in)
		return err
	})
	return out, err
}

// GetSkillVersion implements store.SkillStore.
func (s *Store) GetSkillVersion(ctx context.Context, skillID, version string) (*store.SkillVersion, error) {
	out, err := scanSkillVersion(s.read.QueryRowContext(ctx, `SELECT `+skillVersionCols+` FROM skill_versions
		WHERE skill_id = ? AND version = ?`, skillID, version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("skill %q version %q: %w", skillID, version, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get skill %q version %q: %w", skillID, version, err)
	}
	return out, nil
}

// ListSkillVersions implements store.SkillStore.
func (s *Store) ListSkillVersions(ctx context.Context, skillID, afterVersion string, limit int) ([]*store.SkillVersion, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+skillVersionCols+` FROM skill_versions
		WHERE skill_id = ?1 AND (?2 = '' OR version < ?2) ORDER BY version DESC LIMIT ?3`, skillID, afterVersion, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list the versions of skill %q: %w", skillID, err)
	}
	return collect(rows, "skill versions", scanSkillVersion)
}

// DeleteSkillVersion implements store.SkillStore.
func (s *Store) DeleteSkillVersion(ctx context.Context, skillID, version string) (*store.SkillVersion, error) {
	var out *store.SkillVersion
	err := s.inTx(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM skill_versions WHERE skill_id = ?`, skillID).Scan(&n); err != nil {
			return fmt.Errorf("sqlite: count the versions of skill %q: %w", skillID, err)
		}
		v, err := scanSkillVersion(tx.QueryRowContext(ctx, `DELETE FROM skill_versions WHERE skill_id = ? AND version = ?
			RETURNING `+skillVersionCols, skillID, version))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("skill %q version %q: %w", skillID, version, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: delete skill %q version %q: %w", skillID, version, err)
		}
		if n == 1 {
			return fmt.Errorf("version %q is the only version of skill %q; a skill always has one, so delete the skill instead: %w", version, skillID, store.ErrConflict)
		}
		out = v
		return nil
	})
	return out, err
}
