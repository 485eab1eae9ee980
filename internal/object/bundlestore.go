package object

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/safetar"
)

// bundleStore keeps the tenants' object bundles. The uploaded archive is a
// blob (bundles/TENANT/CLASS, verified by sha256 and length on every read);
// its unpacked tree is a cache in a daemon-private directory, one per
// tenant and digest, that sandboxes mount read-only at /app:
//
//	DIR/trees/TENANT/SHA256/   the unpacked bundle
//	DIR/refs/TENANT/SANDBOX    the digest that sandbox mounted
//	DIR/tmp/                   uploads and extractions in progress
//
// A tree is removed once no class's bundle and no started sandbox refers
// to it. A sandbox that mounted a tree keeps its ref until the runtime
// stops it (hibernation, deletion) or, after a restart, finds it stopped;
// so re-uploading never pulls files from under a live object.
type bundleStore struct {
	blobs blob.Store
	dir   string
	lim   bundleLimits
	log   *slog.Logger
	// mu orders what decides whether a tree lives: refs written, trees
	// renamed into place, and collection.
	mu sync.Mutex
}

type bundleLimits struct{ bytes, unpackedBytes, files int64 }

// BundleInfo describes a class's bundle.
type BundleInfo struct {
	Class  string
	SHA256 string
	Size   int64 // the archive as uploaded
	// Files and Bytes are what it unpacked to (known right after an upload).
	Files, Bytes int64
	UploadedAt   time.Time
}

const bundlePrefix = "bundles/"

// tenantRE keeps tenant ids usable as path segments and blob key segments.
var tenantRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

func bundleKey(tenant, class string) string { return bundlePrefix + tenant + "/" + class }

func newBundleStore(blobs blob.Store, dir string, lim bundleLimits, log *slog.Logger) (*bundleStore, error) {
	for _, d := range []string{"trees", "refs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("object bundles dir: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	return &bundleStore{blobs: blobs, dir: dir, lim: lim, log: log}, nil
}

func (b *bundleStore) tree(tenant, digest string) string {
	return filepath.Join(b.dir, "trees", tenant, digest)
}

func (b *bundleStore) ref(tenant, sandboxID string) string {
	return filepath.Join(b.dir, "refs", tenant, sandboxID)
}

// put streams an archive to a private temp file (at most max_bundle_bytes),
// unpacks it under the bundle rules, and only then stores it as the
// class's bundle: a refused archive leaves nothing behind.
func (b *bundleStore) put(ctx context.Context, tenant, class string, body io.Reader) (*BundleInfo, error) {
	if !tenantRE.MatchString(tenant) {
		return nil, fmt.Errorf("object bundles: tenant id %q cannot name a bundle", tenant)
	}
	f, err := os.CreateTemp(filepath.Join(b.dir, "tmp"), "upload-")
	if err != nil {
		return nil, err
	}
	defer func() { f.Close(); os.Remove(f.Name()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, b.lim.bytes+1))
	if err != nil {
		return nil, &BundleError{Class: class, Reason: "reading the upload: " + err.Error(), Err: err}
	}
	if n > b.lim.bytes {
		return nil, &LimitError{Limit: "durable_objects.max_bundle_bytes", Max: b.lim.bytes, Got: n, What: "bundle size in bytes (read so far)", TooLarge: true}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	tmp, st, err := b.unpack(ctx, class, f)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	info, err := b.blobs.Put(ctx, bundleKey(tenant, class), f)
	if err != nil {
		return nil, fmt.Errorf("store the bundle of %s: %w", class, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); info.SHA256 != sum {
		return nil, fmt.Errorf("store the bundle of %s: the blob store recorded sha256 %s for an upload of %s", class, info.SHA256, sum)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.place(tmp, tenant, info.SHA256); err != nil {
		return nil, err
	}
	b.collect(ctx)
	return &BundleInfo{Class: class, SHA256: info.SHA256, Size: info.Size, Files: st.Files, Bytes: st.Bytes, UploadedAt: info.ModTime}, nil
}

// unpack extracts an archive into a fresh private temp dir, mapping the
// extractor's refusals to errors the API answers with 4xx.
func (b *bundleStore) unpack(ctx context.Context, class string, r io.Reader) (string, safetar.Stats, error) {
	tmp, err := os.MkdirTemp(filepath.Join(b.dir, "tmp"), "tree-")
	if err != nil {
		return "", safetar.Stats{}, err
	}
	st, err := extractBundle(ctx, class, r, tmp, b.lim)
	if err == nil {
		// The tree's own mode: readable by whatever user a sandbox runs as.
		err = os.Chmod(tmp, 0o755)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", st, err
	}
	return tmp, st, nil
}

func extractBundle(ctx context.Context, class string, r io.Reader, dir string, lim bundleLimits) (safetar.Stats, error) {
	tr, done, err := safetar.NewReader(r)
	if err != nil {
		return safetar.Stats{}, bundleErr(class, err, lim)
	}
	defer done()
	st, err := safetar.Extract(ctx, tr, dir, safetar.Bundle(lim.unpackedBytes, lim.files))
	if err != nil {
		return st, bundleErr(class, err, lim)
	}
	if st.Files+st.Symlinks == 0 {
		return st, &BundleError{Class: class, Reason: "the archive has no files"}
	}
	return st, nil
}

func bundleErr(class string, err error, lim bundleLimits) error {
	var le *safetar.LimitError
	switch {
	case errors.As(err, &le) && le.Entries:
		return &LimitError{Limit: "durable_objects.max_bundle_files", Max: lim.files, Got: le.Got, What: "entries in the bundle (counted so far)", TooLarge: true}
	case errors.As(err, &le):
		return &LimitError{Limit: "durable_objects.max_bundle_unpacked_bytes", Max: lim.unpackedBytes, Got: le.Got, What: "unpacked size of the bundle in bytes", TooLarge: true}
	case errors.Is(err, safetar.ErrUnsafeEntry):
		return &BundleError{Class: class, Reason: err.Error(), Err: err}
	case errors.Is(err, safetar.ErrMalformed):
		return &BundleError{Class: class, Reason: "not a readable tar archive (plain, gzip or zstd): " + err.Error(), Err: err}
	}
	return err
}

// place renames an unpacked tree into place; one already there (the same
// digest, unpacked by someone else) wins. The caller holds b.mu.
func (b *bundleStore) place(tmp, tenant, digest string) error {
	dst := b.tree(tenant, digest)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	err := os.Rename(tmp, dst)
	if err != nil && exists(dst) {
		return nil
	}
	return err
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// info describes a class's bundle; nil when it has none.
func (b *bundleStore) info(ctx context.Context, tenant, class string) (*BundleInfo, error) {
	if !tenantRE.MatchString(tenant) {
		return nil, nil
	}
	in, err := b.blobs.Stat(ctx, bundleKey(tenant, class))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &BundleInfo{Class: class, SHA256: in.SHA256, Size: in.Size, UploadedAt: in.ModTime}, nil
}

// remove deletes a class's bundle; trees no one needs go with it.
func (b *bundleStore) remove(ctx context.Context, tenant, class string) error {
	if !tenantRE.MatchString(tenant) {
		return nil
	}
	if err := b.blobs.Delete(ctx, bundleKey(tenant, class)); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.collect(ctx)
	return nil
}

// mount returns the tree a sandbox starting now mounts at /app ("" when
// the class has no bundle) and records the sandbox's ref to it. A tree not
// unpacked on this host (or collected meanwhile) is unpacked from the
// verified blob.
func (b *bundleStore) mount(ctx context.Context, tenant, class, sandboxID string) (string, error) {
	if !tenantRE.MatchString(tenant) {
		return "", nil
	}
	for range 3 {
		in, err := b.blobs.Stat(ctx, bundleKey(tenant, class))
		if errors.Is(err, blob.ErrNotFound) {
			if exists(b.ref(tenant, sandboxID)) {
				b.release(ctx, tenant, sandboxID)
			}
			return "", nil
		}
		if err != nil {
			return "", err
		}
		dst := b.tree(tenant, in.SHA256)
		tmp := ""
		if !exists(dst) {
			if tmp, err = b.fetch(ctx, tenant, class); err != nil {
				return "", err
			}
		}
		ok, err := b.refer(tenant, sandboxID, in.SHA256, tmp)
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		if err != nil || ok {
			return dst, err
		}
		// Collected between the check and the ref (a new upload replaced
		// it): start again from the class's current bundle.
	}
	return "", fmt.Errorf("the bundle of class %q kept changing while its object started; try again", class)
}

// refer places tmp (if any) and writes the sandbox's ref, unless the tree
// is gone. One critical section, so collection cannot come in between.
func (b *bundleStore) refer(tenant, sandboxID, digest, tmp string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if tmp != "" {
		if err := b.place(tmp, tenant, digest); err != nil {
			return false, err
		}
	}
	if !exists(b.tree(tenant, digest)) {
		return false, nil
	}
	p := b.ref(tenant, sandboxID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return false, err
	}
	return true, os.WriteFile(p, []byte(digest), 0o600)
}

// fetch unpacks a class's bundle from its blob into a temp dir. The blob
// is copied out first so it is verified (length and sha256, at EOF) before
// a single entry is extracted.
func (b *bundleStore) fetch(ctx context.Context, tenant, class string) (string, error) {
	rc, _, err := b.blobs.Get(ctx, bundleKey(tenant, class))
	if err != nil {
		return "", err
	}
	defer rc.Close()
	f, err := os.CreateTemp(filepath.Join(b.dir, "tmp"), "fetch-")
	if err != nil {
		return "", err
	}
	defer func() { f.Close(); os.Remove(f.Name()) }()
	if _, err := io.Copy(f, rc); err != nil {
		return "", fmt.Errorf("read the bundle of class %q: %w", class, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tmp, _, err := b.unpack(ctx, class, f)
	return tmp, err
}

// release drops a sandbox's ref (it stopped) and collects what no one needs.
func (b *bundleStore) release(ctx context.Context, tenant, sandboxID string) {
	if !tenantRE.MatchString(tenant) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := os.Remove(b.ref(tenant, sandboxID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.log.WarnContext(ctx, "object bundles: drop a ref", "sandbox", sandboxID, "err", err)
		return
	}
	b.collect(ctx)
}

// collect removes the trees no class's bundle and no ref names. The caller
// holds b.mu. It keeps everything when the blobs cannot be listed.
func (b *bundleStore) collect(ctx context.Context) {
	live := map[string]bool{}
	for in, err := range b.blobs.List(ctx, bundlePrefix) {
		if err != nil {
			b.log.WarnContext(ctx, "object bundles: list; nothing collected", "err", err)
			return
		}
		tenant, _, _ := strings.Cut(strings.TrimPrefix(in.Key, bundlePrefix), "/")
		live[tenant+"/"+in.SHA256] = true
	}
	refs := filepath.Join(b.dir, "refs")
	_ = filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		digest, err := os.ReadFile(p)
		if err == nil {
			live[filepath.Base(filepath.Dir(p))+"/"+string(digest)] = true
		}
		return nil
	})
	trees := filepath.Join(b.dir, "trees")
	tenants, _ := os.ReadDir(trees)
	for _, t := range tenants {
		digests, _ := os.ReadDir(filepath.Join(trees, t.Name()))
		for _, d := range digests {
			if live[t.Name()+"/"+d.Name()] {
				continue
			}
			if err := os.RemoveAll(filepath.Join(trees, t.Name(), d.Name())); err != nil {
				b.log.WarnContext(ctx, "object bundles: remove an unused tree", "tree", d.Name(), "err", err)
			}
		}
		_ = os.Remove(filepath.Join(trees, t.Name())) // only when empty
	}
}

// refs lists the sandboxes holding a ref, by tenant.
func (b *bundleStore) refs() map[string][]string {
	out := map[string][]string{}
	tenants, _ := os.ReadDir(filepath.Join(b.dir, "refs"))
	for _, t := range tenants {
		sbs, _ := os.ReadDir(filepath.Join(b.dir, "refs", t.Name()))
		for _, s := range sbs {
			out[t.Name()] = append(out[t.Name()], s.Name())
		}
	}
	return out
}

// clearTmp removes uploads and extractions an earlier run left (it died
// half-way). Only at start, when none can be in progress.
func (b *bundleStore) clearTmp() {
	ents, _ := os.ReadDir(filepath.Join(b.dir, "tmp"))
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(b.dir, "tmp", e.Name()))
	}
}
