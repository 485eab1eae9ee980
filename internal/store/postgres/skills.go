package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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

func scanSkill(row pgx.Row) (*store.Skill, error) {
	var s store.Skill
	if err := row.Scan(&s.ID, &s.TenantID, &s.DisplayName, &s.LatestVersion, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return nil, err
	}
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return &s, nil
}

func scanSkillVersion(row pgx.Row) (*store.SkillVersion, error) {
	var v store.SkillVersion
	if err := row.Scan(&v.SkillID, &v.Version, &v.TenantID, &v.Name, &v.Description, &v.Directory,
		&v.BlobKey, &v.SHA256, &v.Size, &v.Files, &v.CreatedAt); err != nil {
		return nil, err
	}
	v.CreatedAt = v.CreatedAt.UTC()
	return &v, nil
}

// insertSkillVersion adds v in tx; an existing (skill, version) →
// ErrAlreadyExists.
func (s *Store) insertSkillVersion(ctx context.Context, tx pgx.Tx, v store.SkillVersion) (*store.SkillVersion, error) {
	if v.CreatedAt.IsZero() {
		v.CreatedAt = s.clock()
	}
	out, err := scanSkillVersion(tx.QueryRow(ctx, `INSERT INTO skill_versions
		(`+skillVersionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT DO NOTHING RETURNING `+skillVersionCols,
		v.SkillID, v.Version, v.TenantID, v.Name, v.Description, v.Directory, v.BlobKey, v.SHA256, v.Size, v.Files, v.CreatedAt))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("skill %q version %q: %w", v.SkillID, v.Version, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, mapErr("create skill "+v.SkillID+" version "+v.Version, err)
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
		in.CreatedAt = s.clock()
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
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO skills (id, tenant_id, display_name, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
			in.ID, in.TenantID, in.DisplayName, in.CreatedAt, in.UpdatedAt)
		if err != nil {
			return mapErr("create skill "+in.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("skill %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if outV, err = s.insertSkillVersion(ctx, tx, v); err != nil {
			return err
		}
		outS, err = scanSkill(tx.QueryRow(ctx, `SELECT `+skillCols+` FROM skills WHERE id = $1`, in.ID))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return outS, outV, nil
}

// GetSkill implements store.SkillStore.
func (s *Store) GetSkill(ctx context.Context, id string) (*store.Skill, error) {
	out, err := scanSkill(s.pool.QueryRow(ctx, `SELECT `+skillCols+` FROM skills WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("skill %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get skill "+id, err)
	}
	return out, nil
}

// ListSkills implements store.SkillStore.
func (s *Store) ListSkills(ctx context.Context, p store.ListResourcesParams) ([]*store.Skill, error) {
	where, tail, page := resourcePage(p, 2)
	rows, err := s.pool.Query(ctx, `SELECT `+skillCols+` FROM skills WHERE tenant_id = $1`+where+tail,
		append([]any{p.TenantID}, page...)...)
	if err != nil {
		return nil, mapErr("list skills", err)
	}
	return collect(rows, "skills", scanSkill)
}

// DeleteSkill implements store.SkillStore (versions go by cascade).
func (s *Store) DeleteSkill(ctx context.Context, id string) ([]*store.SkillVersion, error) {
	var out []*store.SkillVersion
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+skillVersionCols+` FROM skill_versions WHERE skill_id = $1 ORDER BY version`, id)
		if err != nil {
			return mapErr("read the versions of skill "+id, err)
		}
		if out, err = collect(rows, "skill versions", scanSkillVersion); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM skills WHERE id = $1`, id)
		if err != nil {
			return mapErr("delete skill "+id, err)
		}
		if tag.RowsAffected() == 0 {
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
		in.CreatedAt = s.clock()
	}
	var out *store.SkillVersion
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE skills SET updated_at = GREATEST(updated_at, $1) WHERE id = $2`, in.CreatedAt, in.SkillID)
		if err != nil {
			return mapErr("touch skill "+in.SkillID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("skill %q: %w", in.SkillID, store.ErrNotFound)
		}
		out, err = s.insertSkillVersion(ctx, tx, in)
		return err
	})
	return out, err
}

// GetSkillVersion implements store.SkillStore.
func (s *Store) GetSkillVersion(ctx context.Context, skillID, version string) (*store.SkillVersion, error) {
	out, err := scanSkillVersion(s.pool.QueryRow(ctx, `SELECT `+skillVersionCols+` FROM skill_versions
		WHERE skill_id = $1 AND version = $2`, skillID, version))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("skill %q version %q: %w", skillID, version, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get skill "+skillID+" version "+version, err)
	}
	return out, nil
}

// ListSkillVersions implements store.SkillStore.
func (s *Store) ListSkillVersions(ctx context.Context, skillID, afterVersion string, limit int) ([]*store.SkillVersion, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+skillVersionCols+` FROM skill_versions
		WHERE skill_id = $1 AND ($2::text = '' OR version < $2) ORDER BY version DESC LIMIT $3`, skillID, afterVersion, lim)
	if err != nil {
		return nil, mapErr("list the versions of skill "+skillID, err)
	}
	return collect(rows, "skill versions", scanSkillVersion)
}

// DeleteSkillVersion implements store.SkillStore.
func (s *Store) DeleteSkillVersion(ctx context.Context, skillID, version string) (*store.SkillVersion, error) {
	var out *store.SkillVersion
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Lock the skill first, then count in a statement of its own: under
		// READ COMMITTED a count in the locking statement reads that
		// statement's snapshot, so two deletes of the last two versions
		// would both see two.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM skills WHERE id = $1 FOR UPDATE`, skillID); err != nil {
			return mapErr("lock skill "+skillID, err)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM skill_versions WHERE skill_id = $1`, skillID).Scan(&n); err != nil {
			return mapErr("count the versions of skill "+skillID, err)
		}
		v, err := scanSkillVersion(tx.QueryRow(ctx, `DELETE FROM skill_versions WHERE skill_id = $1 AND version = $2
			RETURNING `+skillVersionCols, skillID, version))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("skill %q version %q: %w", skillID, version, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("delete skill "+skillID+" version "+version, err)
		}
		if n == 1 {
			return fmt.Errorf("version %q is the only version of skill %q; a skill always has one, so delete the skill instead: %w", version, skillID, store.ErrConflict)
		}
		out = v
		return nil
	})
	return out, err
}
