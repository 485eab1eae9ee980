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
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/safetar"
	"github.com/agentkernel/agentkernel/internal/store"
)

// bundleStore keeps the tenants' object bundles. The uploaded archive is a
// blob under a content-addressed key (bundles/TENANT/sha256/HEX, verified
// by sha256 and length on every read) and the class's object_bundles row
// names it: the row is what keeps the blob GC off the blob, and a new
// upload writes a new key instead of overwriting the blob a wake may be
// reading. A replaced or deleted bundle's blob is left to the GC, which
// collects it once no row holds its key (two classes of a tenant that
// uploaded the same bytes share one). Its unpacked tree is a cache in a
// daemon-private directory, one per tenant and digest, that sandboxes
// mount read-only at /app:
//
//	DIR/trees/TENANT/SHA256/   the unpacked bundle
//	DIR/refs/TENANT/SANDBOX    the digest that sandbox mounted
//	DIR/tmp/                   uploads and extractions in progress
//
// A tree is removed once no bundle row of its tenant and no started
// sandbox refers to it. A sandbox that mounted a tree keeps its ref until
// the runtime stops it (hibernation, deletion) or, after a restart, finds
// it stopped; so re-uploading never pulls files from under a live object.
type bundleStore struct {
	st    store.ObjectStore
	blobs blob.Store
	pins  blob.Pinner
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

// bundleKey is the blob key of a tenant's archive with this sha256. The
// tenant is part of it, so no tenant's row can name another's blob.
func bundleKey(tenant, digest string) string { return bundlePrefix + tenant + "/sha256/" + digest }

func newBundleStore(st store.ObjectStore, blobs blob.Store, pins blob.Pinner, dir string, lim bundleLimits, log *slog.Logger) (*bundleStore, error) {
	for _, d := range []string{"trees", "refs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("object bundles dir: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	if pins == nil {
		pins = blob.NoPins{}
	}
	return &bundleStore{st: st, blobs: blobs, pins: pins, dir: dir, lim: lim, log: log}, nil
}

func (b *bundleStore) tree(tenant, digest string) string {
	return filepath.Join(b.dir, "trees", tenant, digest)
}

func (b *bundleStore) ref(tenant, sandboxID string) string {
	return filepath.Join(b.dir, "refs", tenant, sandboxID)
}

// put streams an archive to a private temp file (at most max_bundle_bytes),
// unpacks it under the bundle rules, and only then stores it as the
// class's bundle: a refused archive leaves nothing behind. The blob's key
// is pinned from before its Put until the row naming it is committed, the
// window in which the blob GC would see a blob no row holds.
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
	sum := hex.EncodeToString(h.Sum(nil))
	row, err := b.record(ctx, tenant, class, sum, time.Time{}, func(key string) (blob.Info, error) { return b.blobs.Put(ctx, key, f) })
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.place(tmp, tenant, row.SHA256); err != nil {
		return nil, err
	}
	b.collect(ctx, tenant)
	return &BundleInfo{Class: class, SHA256: row.SHA256, Size: row.Size, Files: st.Files, Bytes: st.Bytes, UploadedAt: row.UploadedAt}, nil
}

// record stores an archive whose sha256 is digest under its key (write
// does the Put) and makes it the class's bundle. The class may have been
// deleted meanwhile: then there is no row, and the blob is the GC's.
func (b *bundleStore) record(ctx context.Context, tenant, class, digest string, uploaded time.Time, write func(key string) (blob.Info, error)) (*store.ObjectBundle, error) {
	key := bundleKey(tenant, digest)
	defer b.pins.Pin(key)()
	info, err := write(key)
	if err != nil {
		return nil, fmt.Errorf("store the bundle of %s: %w", class, err)
	}
	if info.SHA256 != digest {
		return nil, fmt.Errorf("store the bundle of %s: the blob store recorded sha256 %s for an archive of %s", class, info.SHA256, digest)
	}
	row, err := b.st.PutObjectBundle(ctx, &store.ObjectBundle{TenantID: tenant, Class: class, BlobKey: key,
		SHA256: digest, Size: info.Size, UploadedAt: uploaded})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w %q: it was deleted during the upload", ErrUnknownClass, class)
	}
	return row, err
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
	row, err := b.st.GetObjectBundle(ctx, tenant, class)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &BundleInfo{Class: class, SHA256: row.SHA256, Size: row.Size, UploadedAt: row.UploadedAt}, nil
}

// remove deletes a class's bundle row (false when it had none) and the
// trees no one needs any more. Its blob is the GC's: another class of the
// tenant may hold the same key.
func (b *bundleStore) remove(ctx context.Context, tenant, class string) (bool, error) {
	if !tenantRE.MatchString(tenant) {
		return false, nil
	}
	err := b.st.DeleteObjectBundle(ctx, tenant, class)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	b.forget(ctx, tenant)
	return true, nil
}

// forget collects the tenant's trees after a bundle row went (a class
// deleted takes its row with it).
func (b *bundleStore) forget(ctx context.Context, tenant string) {
	if !tenantRE.MatchString(tenant) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.collect(ctx, tenant)
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
		row, err := b.st.GetObjectBundle(ctx, tenant, class)
		if errors.Is(err, store.ErrNotFound) {
			if exists(b.ref(tenant, sandboxID)) {
				b.release(ctx, tenant, sandboxID)
			}
			return "", nil
		}
		if err != nil {
			return "", err
		}
		dst := b.tree(tenant, row.SHA256)
		tmp := ""
		if !exists(dst) {
			tmp, err = b.fetch(ctx, class, row)
			if errors.Is(err, blob.ErrNotFound) {
				// Replaced, and its blob collected, since the row was read;
				// unless the row still names it.
				if cur, err := b.st.GetObjectBundle(ctx, tenant, class); err == nil && cur.BlobKey == row.BlobKey {
					return "", fmt.Errorf("the bundle of class %q (sha256 %s) is missing from the blob store; upload it again", class, row.SHA256)
				}
				continue
			}
			if err != nil {
				return "", err
			}
		}
		ok, err := b.refer(tenant, sandboxID, row.SHA256, tmp)
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

// fetch unpacks a bundle from its blob into a temp dir. The blob is copied
// out first so it is verified (length and sha256, at EOF) before a single
// entry is extracted; and it must be the archive the row names.
func (b *bundleStore) fetch(ctx context.Context, class string, row *store.ObjectBundle) (string, error) {
	rc, in, err := b.blobs.Get(ctx, row.BlobKey)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if in.SHA256 != row.SHA256 {
		return "", fmt.Errorf("the bundle of class %q: blob %s holds sha256 %s, the class records %s", class, row.BlobKey, in.SHA256, row.SHA256)
	}
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
	b.collect(ctx, tenant)
}

// collect removes the tenant's trees that no bundle row of the tenant and
// no ref names. The caller holds b.mu. It keeps everything when the rows
// cannot be read.
func (b *bundleStore) collect(ctx context.Context, tenant string) {
	rows, err := b.st.ListObjectBundles(ctx, tenant)
	if err != nil {
		b.log.WarnContext(ctx, "object bundles: list; nothing collected", "tenant", tenant, "err", err)
		return
	}
	live := map[string]bool{}
	for _, r := range rows {
		live[r.SHA256] = true
	}
	refs, _ := os.ReadDir(filepath.Join(b.dir, "refs", tenant))
	for _, r := range refs {
		if digest, err := os.ReadFile(filepath.Join(b.dir, "refs", tenant, r.Name())); err == nil {
			live[string(digest)] = true
		}
	}
	trees := filepath.Join(b.dir, "trees", tenant)
	digests, _ := os.ReadDir(trees)
	for _, d := range digests {
		if live[d.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(trees, d.Name())); err != nil {
			b.log.WarnContext(ctx, "object bundles: remove an unused tree", "tenant", tenant, "tree", d.Name(), "err", err)
		}
	}
	_ = os.Remove(trees) // only when empty
}

// collectAll collects the trees of every tenant that has some on this
// host.
func (b *bundleStore) collectAll(ctx context.Context) {
	tenants, _ := os.ReadDir(filepath.Join(b.dir, "trees"))
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range tenants {
		if tenantRE.MatchString(t.Name()) {
			b.collect(ctx, t.Name())
		}
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
