package store

import (
	"context"
	"fmt"
	"time"
)

// This file holds the skills of the Managed Agents API (/v1/skills): a
// skill is a tenant-owned name for a series of versions, and each version
// is one validated archive of a skill directory (SKILL.md at its root),
// kept in the blob store under BlobKey. A version's row and its blob are
// immutable: a new upload is a new version.

// Skill is one skill. LatestVersion is the newest version's id, derived
// from the versions (never stored apart from them), or "" when the skill
// has none.
type Skill struct {
	ID            string
	TenantID      string
	DisplayName   string
	LatestVersion string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// SkillVersion is one uploaded version of a skill. Version is its id, a
// decimal unix-microsecond timestamp as the hosted API uses (so ids of one
// skill sort as they were made); Name and Description come from the
// SKILL.md front matter; Directory is the top-level directory of the
// upload, the name the archive wraps the files in.
type SkillVersion struct {
	SkillID     string
	Version     string
	TenantID    string
	Name        string
	Description string
	Directory   string
	// BlobKey names the normalised archive (a zip) in the blob store;
	// SHA256 and Size are the blob's, Files the number of files in it.
	BlobKey   string
	SHA256    string
	Size      int64
	Files     int64
	CreatedAt time.Time
}

// Check is what both engines require of a version they insert.
func (v *SkillVersion) Check() error {
	if v.SkillID == "" || v.Version == "" || v.BlobKey == "" || v.Name == "" {
		return fmt.Errorf("skill version %q/%q: SkillID, Version, Name and BlobKey are required: %w", v.SkillID, v.Version, ErrInvalid)
	}
	return nil
}

// SkillStore holds skills and their versions. Tenancy is the caller's
// check (rows carry TenantID), as for the other Managed Agents resources.
type SkillStore interface {
	// CreateSkill creates a skill and its first version in one
	// transaction (a skill always has a version). Existing id →
	// ErrAlreadyExists.
	CreateSkill(ctx context.Context, s *Skill, first *SkillVersion) (*Skill, *SkillVersion, error)
	GetSkill(ctx context.Context, id string) (*Skill, error)
	// ListSkills pages through p.TenantID's skills by id.
	ListSkills(ctx context.Context, p ListResourcesParams) ([]*Skill, error)
	// DeleteSkill deletes the skill and every version of it and returns
	// the deleted versions (their blobs are the caller's to delete).
	DeleteSkill(ctx context.Context, id string) ([]*SkillVersion, error)

	// CreateSkillVersion adds a version and moves the skill's UpdatedAt:
	// unknown skill → ErrNotFound; a version id the skill already has →
	// ErrAlreadyExists.
	CreateSkillVersion(ctx context.Context, v *SkillVersion) (*SkillVersion, error)
	GetSkillVersion(ctx context.Context, skillID, version string) (*SkillVersion, error)
	// ListSkillVersions pages through a skill's versions, newest first,
	// starting after the version afterVersion ("" from the newest).
	ListSkillVersions(ctx context.Context, skillID, afterVersion string, limit int) ([]*SkillVersion, error)
	// DeleteSkillVersion deletes one version; deleting the skill's only
	// version → ErrConflict (a skill always has one: delete the skill).
	DeleteSkillVersion(ctx context.Context, skillID, version string) (*SkillVersion, error)
}
