package wsnap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// Entry kinds of a manifest.
const (
	kindDir     = "d"
	kindFile    = "f"
	kindSymlink = "l"
)

// entry is one path of a snapshot, in the order a walk of the tree meets
// them (a directory before its contents, names sorted).
type entry struct {
	Path   string   `json:"p"`
	Kind   string   `json:"k"`
	Mode   uint32   `json:"m"` // permission and set-id bits
	UID    int      `json:"u"`
	GID    int      `json:"g"`
	MTime  int64    `json:"t"` // unix nanoseconds
	Size   int64    `json:"s,omitempty"`
	Chunks []string `json:"c,omitempty"` // sha256 of each chunk, in order
	Link   string   `json:"l,omitempty"`
}

// manifest is a snapshot: the version of this format and the entries.
type manifest struct {
	Version int     `json:"v"`
	Entries []entry `json:"e"`
}

const manifestVersion = 1

// maxManifestBytes bounds a manifest read back (compressed and not): a
// million entries fit.
const maxManifestBytes = 512 << 20

// putManifest stores m under the hash of its bytes and returns its id. The
// same tree gives the same id, stored once.
func (s *Store) putManifest(ctx context.Context, m *manifest) (string, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(raw)
	id := IDPrefix + hex.EncodeToString(h[:])
	if _, err := s.blobs.Stat(ctx, manifestKey(id)); err == nil {
		return id, nil
	}
	if _, err := s.blobs.Put(ctx, manifestKey(id), bytes.NewReader(s.enc.EncodeAll(raw, nil))); err != nil {
		return "", fmt.Errorf("store manifest %s: %w", id, err)
	}
	return id, nil
}

// manifest reads a snapshot's manifest.
func (s *Store) manifest(ctx context.Context, id string) (*manifest, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("%q is not a workspace snapshot id: %w", id, ErrNotFound)
	}
	r, _, err := s.blobs.Get(ctx, manifestKey(id))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	defer r.Close()
	packed, err := io.ReadAll(io.LimitReader(r, maxManifestBytes))
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	raw, err := s.dec.DecodeAll(packed, nil)
	if err == nil && len(raw) > maxManifestBytes {
		err = errors.New("manifest too large")
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	if h := sha256.Sum256(raw); IDPrefix+hex.EncodeToString(h[:]) != id {
		return nil, fmt.Errorf("snapshot %s: manifest does not match its id: %w", id, blob.ErrCorrupt)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	if m.Version != manifestVersion {
		return nil, fmt.Errorf("snapshot %s: manifest version %d, this binary reads %d", id, m.Version, manifestVersion)
	}
	return &m, nil
}
