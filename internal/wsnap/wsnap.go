// Package wsnap stores workspace snapshots incrementally: every regular
// file is cut into content-defined chunks (restic's Rabin chunker: 512 KiB
// to 8 MiB, 1 MiB on average; a file smaller than that is one chunk), each
// chunk is stored once, zstd-compressed, under the sha256 of its content,
// and a snapshot is a manifest — the tree's entries with their chunk lists —
// stored under the hash of its own bytes. Snapshots of one session, its
// forks and its branches share every chunk they have in common, so a
// hundred snapshots of a large workspace with small changes cost little
// more than one copy.
//
// Writing reads the workspace from the host through package beneath (no
// symlink is ever followed: the workspace is the sandbox's to change), and
// remembers each file's chunks by (inode, size, mtime, ctime), so a snapshot
// reads only the files that changed since the last one. Restoring turns the
// manifest back into a tar stream and extracts it with package safetar, the
// one safe extractor of the project.
//
// Chunks and manifests live under the blob prefix Prefix; the generic blob
// collector leaves it alone and Store.Collect collects it: a manifest no
// live snapshot names and no chunk of a live manifest survives a pass.
package wsnap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/restic/chunker"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// Prefix is the blob key prefix of everything this package stores.
const Prefix = "wsnap/"

const (
	manifestPrefix = Prefix + "m/"
	chunkPrefix    = Prefix + "c/"
	// IDPrefix starts every snapshot id.
	IDPrefix = "wsnap_"
)

// pol is the chunker's irreducible polynomial. It is fixed: snapshots
// share chunks only if every writer cuts files at the same places.
const pol = chunker.Pol(0x3DA3358B4DC173)

// ErrNotFound: no snapshot has that id.
var ErrNotFound = errors.New("workspace snapshot not found")

// Stats counts what one Write read and stored.
type Stats struct {
	Files, Dirs, Symlinks int
	Skipped               int   // sockets, FIFOs, devices: never archived
	Bytes                 int64 // regular file content in the snapshot
	ReadBytes             int64 // content read (files changed since the last snapshot)
	NewChunks             int
	NewBytes              int64 // compressed bytes of the chunks stored by this Write
}

// Store writes, restores and collects snapshots in a blob store.
type Store struct {
	blobs blob.Store
	log   *slog.Logger
	enc   *zstd.Encoder
	dec   *zstd.Decoder

	// gc is held shared by every Write from its first chunk lookup to its
	// manifest's Put, and exclusively by Collect: a chunk Collect found
	// dead is never the one a Write decided to reuse.
	gc sync.RWMutex

	// racy: a file whose ctime is this close to a Write's start may still
	// change within the same timestamp tick; its chunks are not
	// remembered (default 1s).
	racy time.Duration

	mu sync.Mutex
	// known are chunk keys stored (cleared by Collect).
	known map[string]bool
	// files are, per workspace directory, the chunks of each file as it
	// was when last read.
	files map[string]map[string]fileMemo
}

// New returns a store over blobs.
func New(blobs blob.Store, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	return &Store{blobs: blobs, log: log, enc: enc, dec: dec, racy: time.Second,
		known: map[string]bool{}, files: map[string]map[string]fileMemo{}}
}

// ValidID reports whether id has the shape of a snapshot id.
func ValidID(id string) bool {
	h, ok := strings.CutPrefix(id, IDPrefix)
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func manifestKey(id string) string { return manifestPrefix + id }

func chunkKey(sum string) string { return chunkPrefix + sum[:2] + "/" + sum }

// putChunk stores data under its hash unless it is there already, and
// returns the hash and the bytes it stored (0 when it was there).
func (s *Store) putChunk(ctx context.Context, data []byte) (string, int64, error) {
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	key := chunkKey(sum)
	s.mu.Lock()
	known := s.known[key]
	s.mu.Unlock()
	if known {
		return sum, 0, nil
	}
	if _, err := s.blobs.Stat(ctx, key); err == nil {
		s.remember(key)
		return sum, 0, nil
	} else if !errors.Is(err, blob.ErrNotFound) {
		return "", 0, err
	}
	packed := s.enc.EncodeAll(data, nil)
	info, err := s.blobs.Put(ctx, key, bytes.NewReader(packed))
	if err != nil {
		return "", 0, fmt.Errorf("store chunk %s: %w", sum, err)
	}
	s.remember(key)
	return sum, info.Size, nil
}

func (s *Store) remember(key string) {
	s.mu.Lock()
	s.known[key] = true
	s.mu.Unlock()
}

// chunk reads one chunk back and checks it is what its name says.
func (s *Store) chunk(ctx context.Context, sum string) ([]byte, error) {
	r, _, err := s.blobs.Get(ctx, chunkKey(sum))
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", sum, err)
	}
	defer r.Close()
	packed, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", sum, err)
	}
	data, err := s.dec.DecodeAll(packed, nil)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", sum, err)
	}
	if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
		return nil, fmt.Errorf("chunk %s: content does not match its hash: %w", sum, blob.ErrCorrupt)
	}
	return data, nil
}
