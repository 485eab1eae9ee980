// Package skills keeps the skills of the Managed Agents API: uploads are
// validated (archive.go), normalised into one zip per version in the blob
// store, and materialised into a session's sandbox by the ContextHook
// (hook.go), whose system prompt text lists them for the model.
package skills

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Config configures a Service.
type Config struct {
	Store store.SkillStore
	Blobs blob.Store
	// Pins keeps the blob GC away from an archive between its Put and the
	// commit of the row naming it (the blob GC; nil when there is none).
	Pins   blob.Pinner
	Limits Limits
	Log    *slog.Logger
	// Now is the clock version ids are made from (default time.Now).
	Now func() time.Time
}

// Service creates, reads and deletes skills and their versions, scoped to
// a tenant: another tenant's skill answers like a missing one.
type Service struct {
	st    store.SkillStore
	blobs blob.Store
	pins  blob.Pinner
	lim   Limits
	log   *slog.Logger
	now   func() time.Time
}

// New returns a Service.
func New(cfg Config) *Service {
	s := &Service{st: cfg.Store, blobs: cfg.Blobs, pins: cfg.Pins, lim: cfg.Limits.withDefaults(), log: cfg.Log, now: cfg.Now}
	if s.pins == nil {
		s.pins = blob.NoPins{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Limits returns the limits uploads are held to.
func (s *Service) Limits() Limits { return s.lim }

// blobKey names a new archive of a skill: a fresh id of its own (not the
// version, which may still change when the row is inserted), the tenant
// in it so no tenant's row can name another's blob.
func blobKey(tenant, skillID string) string {
	return "skills/" + tenant + "/" + skillID + "/" + ids.New("arc") + ".zip"
}

// archive writes the bundle as a zip whose members sit under the skill's
// directory ("pdf/SKILL.md"), the shape the SDK's skill extractor unwraps.
func archive(b *Bundle) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range b.Files {
		h := &zip.FileHeader{Name: b.Dir + "/" + f.Path, Method: zip.Deflate}
		h.SetMode(f.Mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newVersion validates parts and stores their archive; insert writes the
// row (while the key is pinned). A failed insert deletes the blob again.
func (s *Service) newVersion(ctx context.Context, tenant, skillID string, parts []Part, insert func(v *store.SkillVersion) error) (*store.SkillVersion, error) {
	b, err := Read(parts, s.lim)
	if err != nil {
		return nil, err
	}
	data, err := archive(b)
	if err != nil {
		return nil, fmt.Errorf("skills: pack the archive: %w", err)
	}
	now := s.now().UTC()
	v := &store.SkillVersion{SkillID: skillID, Version: strconv.FormatInt(now.UnixMicro(), 10), TenantID: tenant,
		Name: b.Name, Description: b.Description, Directory: b.Dir, Files: int64(len(b.Files)), CreatedAt: now.Truncate(time.Microsecond)}
	v.BlobKey = blobKey(tenant, skillID)
	unpin := s.pins.Pin(v.BlobKey)
	defer unpin()
	info, err := s.blobs.Put(ctx, v.BlobKey, bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("skills: store the archive of %s: %w", skillID, err)
	}
	v.SHA256, v.Size = info.SHA256, info.Size
	if err := insert(v); err != nil {
		if derr := s.blobs.Delete(context.WithoutCancel(ctx), v.BlobKey); derr != nil {
			s.log.WarnContext(ctx, "skills: delete the archive of a version not recorded", "key", v.BlobKey, "err", derr)
		}
		return nil, err
	}
	return v, nil
}

// Create validates the upload and creates a skill with it as the first
// version. displayName "" takes the front matter's name.
func (s *Service) Create(ctx context.Context, tenant, displayName string, parts []Part) (*store.Skill, *store.SkillVersion, error) {
	id := ids.New("skill")
	v, err := s.newVersion(ctx, tenant, id, parts, func(v *store.SkillVersion) error {
		name := displayName
		if name == "" {
			name = v.Name
		}
		_, out, err := s.st.CreateSkill(ctx, &store.Skill{ID: id, TenantID: tenant, DisplayName: name, CreatedAt: v.CreatedAt}, v)
		if err == nil {
			*v = *out
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	sk, err := s.st.GetSkill(ctx, id)
	return sk, v, err
}

// AddVersion validates the upload and adds it as the skill's newest
// version.
func (s *Service) AddVersion(ctx context.Context, tenant, skillID string, parts []Part) (*store.SkillVersion, error) {
	sk, err := s.Get(ctx, tenant, skillID)
	if err != nil {
		return nil, err
	}
	return s.newVersion(ctx, tenant, skillID, parts, func(v *store.SkillVersion) error {
		// Versions are microsecond timestamps; one made in the same
		// microsecond as the latest, or before it (a clock step), takes
		// the next id instead.
		if latest, err := strconv.ParseInt(sk.LatestVersion, 10, 64); err == nil {
			if mine, _ := strconv.ParseInt(v.Version, 10, 64); mine <= latest {
				v.Version = strconv.FormatInt(latest+1, 10)
			}
		}
		out, err := s.st.CreateSkillVersion(ctx, v)
		if err == nil {
			*v = *out
		}
		return err
	})
}

// Get returns the tenant's skill.
func (s *Service) Get(ctx context.Context, tenant, id string) (*store.Skill, error) {
	sk, err := s.st.GetSkill(ctx, id)
	if err == nil && sk.TenantID != tenant {
		err = fmt.Errorf("skill %q: %w", id, store.ErrNotFound)
	}
	return sk, err
}

// List pages through the tenant's skills.
func (s *Service) List(ctx context.Context, p store.ListResourcesParams) ([]*store.Skill, error) {
	return s.st.ListSkills(ctx, p)
}

// Delete deletes the skill with its versions, then their archives (a
// crash between the two leaves blobs no row holds: the blob GC's).
func (s *Service) Delete(ctx context.Context, tenant, id string) error {
	if _, err := s.Get(ctx, tenant, id); err != nil {
		return err
	}
	gone, err := s.st.DeleteSkill(ctx, id)
	if err != nil {
		return err
	}
	for _, v := range gone {
		s.dropBlob(ctx, v)
	}
	return nil
}

func (s *Service) dropBlob(ctx context.Context, v *store.SkillVersion) {
	if err := s.blobs.Delete(context.WithoutCancel(ctx), v.BlobKey); err != nil {
		s.log.WarnContext(ctx, "skills: delete the archive of a deleted version (the blob GC will)", "key", v.BlobKey, "err", err)
	}
}

// Version returns one version of the tenant's skill; "latest" names the
// newest.
func (s *Service) Version(ctx context.Context, tenant, skillID, version string) (*store.SkillVersion, error) {
	sk, err := s.Get(ctx, tenant, skillID)
	if err != nil {
		return nil, err
	}
	if version == "latest" {
		version = sk.LatestVersion
	}
	return s.st.GetSkillVersion(ctx, skillID, version)
}

// Versions pages through a skill's versions, newest first.
func (s *Service) Versions(ctx context.Context, tenant, skillID, after string, limit int) ([]*store.SkillVersion, error) {
	if _, err := s.Get(ctx, tenant, skillID); err != nil {
		return nil, err
	}
	return s.st.ListSkillVersions(ctx, skillID, after, limit)
}

// DeleteVersion deletes one version and its archive.
func (s *Service) DeleteVersion(ctx context.Context, tenant, skillID, version string) error {
	if _, err := s.Get(ctx, tenant, skillID); err != nil {
		return err
	}
	v, err := s.st.DeleteSkillVersion(ctx, skillID, version)
	if err != nil {
		return err
	}
	s.dropBlob(ctx, v)
	return nil
}

// Open streams a version's archive (a zip).
func (s *Service) Open(ctx context.Context, tenant, skillID, version string) (io.ReadCloser, *store.SkillVersion, error) {
	v, err := s.Version(ctx, tenant, skillID, version)
	if err != nil {
		return nil, nil, err
	}
	rc, _, err := s.blobs.Get(ctx, v.BlobKey)
	if err != nil {
		return nil, nil, fmt.Errorf("skills: the archive of skill %s version %s: %w", skillID, v.Version, err)
	}
	return rc, v, nil
}

// Files reads a version's files back from its archive (which this
// service wrote and the blob store verifies), paths relative to the
// skill's directory.
func (s *Service) Files(ctx context.Context, v *store.SkillVersion) ([]File, error) {
	rc, _, err := s.blobs.Get(ctx, v.BlobKey)
	if err != nil {
		return nil, fmt.Errorf("skills: the archive of skill %s version %s: %w", v.SkillID, v.Version, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, v.Size+1))
	if err != nil {
		return nil, fmt.Errorf("skills: read the archive of skill %s version %s: %w", v.SkillID, v.Version, err)
	}
	// Read again under the same rules as an upload: the blob is ours, but
	// what reaches a sandbox is checked where it is used.
	b, err := Read([]Part{{Name: "skill.zip", Data: data}}, Limits{UploadBytes: int64(len(data)) + 1, Files: s.lim.Files, Bytes: s.lim.Bytes, Ratio: 1 << 20})
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return nil, fmt.Errorf("skills: the stored archive of skill %s version %s: %s", v.SkillID, v.Version, ie.Msg)
		}
		return nil, err
	}
	return b.Files, nil
}
