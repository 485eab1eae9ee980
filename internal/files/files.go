// Package files is the Files API's service (/v1/files): a file's bytes are
// streamed into the blob store (hashed and counted by it on the way, never
// held whole in memory) and then recorded as a row. The order makes every
// acknowledged file durable and every unacknowledged one invisible: the
// blob is fsynced before the row is inserted, so a crash before the insert
// leaves a blob no row names (the blob GC's, after its grace period) and
// no file; the upload is acknowledged only after the insert committed.
package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// ErrTooLarge is wrapped by Create's error when the body is longer than
// Config.MaxBytes; nothing is stored then.
var ErrTooLarge = errors.New("file too large")

// DefaultMaxBytes is the upload limit when Config.MaxBytes is 0.
const DefaultMaxBytes = 500 << 20

// Config configures a Service.
type Config struct {
	Store store.FileStore
	Blobs blob.Store
	// MaxBytes limits one file's size (DefaultMaxBytes when 0).
	MaxBytes int64
	Log      *slog.Logger
	// Pins keeps the blob GC away from a file's blob between its Put and
	// the row that references it (none: no GC runs beside this service).
	Pins blob.Pinner
	// Now is the clock (tests use a fake one).
	Now func() time.Time
	// BeforeRecord, when set, runs after a file's blob is stored and
	// before its row is inserted (crash tests stop the daemon there).
	BeforeRecord func(key string)
}

// CreateParams describes a file to store.
type CreateParams struct {
	// Filename is reduced to its last path component (unless KeepPath);
	// "" becomes "unnamed" plus the extension of the MIME type.
	Filename string
	// KeepPath keeps Filename as the clean relative path it is (a session
	// output's path under /mnt/session/outputs/, e.g. "report/a.csv"):
	// the name says where the agent put it, and two outputs of one name
	// in different directories stay apart.
	KeepPath bool
	// MimeType "" or application/octet-stream is guessed from the
	// filename's extension, then from the first bytes.
	MimeType string
	Body     io.Reader
	// ScopeSessionID attaches the file to a session ("" for none).
	ScopeSessionID string
	// Downloadable is the SDK's flag: GET /content serves only such files.
	Downloadable bool
	// ExpiresAt, when set, is when the file stops being served.
	ExpiresAt *time.Time
}

// Service stores, finds and serves files.
type Service struct {
	st     store.FileStore
	blobs  blob.Store
	max    int64
	log    *slog.Logger
	pins   blob.Pinner
	now    func() time.Time
	before func(string)
}

// New builds the service.
func New(c Config) *Service {
	s := &Service{st: c.Store, blobs: c.Blobs, max: c.MaxBytes, log: c.Log, pins: c.Pins, now: c.Now, before: c.BeforeRecord}
	if s.max <= 0 {
		s.max = DefaultMaxBytes
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.pins == nil {
		s.pins = blob.NoPins{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// MaxBytes is the largest file Create accepts.
func (s *Service) MaxBytes() int64 { return s.max }

// blobKey is where a file's bytes live: one blob per file, so deleting a
// file deletes exactly its bytes.
func blobKey(id string) string { return "files/" + id }

// Staged is a file whose bytes are stored and pinned but not yet
// recorded: Commit makes it a file, Abort deletes the bytes. The API
// stages the multipart "file" part before it has read the fields after
// it (expires_in_seconds).
type Staged struct {
	s      *Service
	file   store.File
	unpin  func()
	closed bool
}

// Stage streams p.Body into the blob store. A body longer than MaxBytes
// gives an error wrapping ErrTooLarge and stores nothing.
func (s *Service) Stage(ctx context.Context, tenantID string, p CreateParams) (*Staged, error) {
	id := ids.New("file")
	key := blobKey(id)
	body := bufio.NewReaderSize(p.Body, 64<<10)
	mt := mimeType(p.MimeType, p.Filename, body)
	lim := &limitReader{r: body, left: s.max}
	unpin := s.pins.Pin(key)
	info, err := s.blobs.Put(ctx, key, lim)
	if err != nil {
		unpin()
		if lim.over {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, s.max)
		}
		return nil, fmt.Errorf("store file %s: %w", id, err)
	}
	return &Staged{s: s, unpin: unpin, file: store.File{ID: id, TenantID: tenantID, Filename: filename(p.Filename, mt, p.KeepPath),
		MimeType: mt, SizeBytes: info.Size, SHA256: info.SHA256, BlobKey: key, Downloadable: p.Downloadable,
		ScopeSessionID: p.ScopeSessionID, ExpiresAt: p.ExpiresAt}}, nil
}

// Commit records the staged file; a positive ttl makes it expire ttl
// after its creation time. After an error the bytes are deleted.
func (st *Staged) Commit(ctx context.Context, ttl time.Duration) (*store.File, error) {
	if st.closed {
		return nil, errors.New("files: staged file committed or aborted already")
	}
	st.closed = true
	defer st.unpin()
	if st.s.before != nil {
		st.s.before(st.file.BlobKey)
	}
	st.file.CreatedAt = st.s.now()
	if ttl > 0 {
		at := st.file.CreatedAt.Add(ttl)
		st.file.ExpiresAt = &at
	}
	out, err := st.s.st.CreateFile(ctx, &st.file)
	if err != nil {
		st.s.deleteBlob(st.file.BlobKey)
		return nil, err
	}
	return out, nil
}

// Abort deletes the staged bytes; after Commit it does nothing.
func (st *Staged) Abort() {
	if st.closed {
		return
	}
	st.closed = true
	defer st.unpin()
	st.s.deleteBlob(st.file.BlobKey)
}

func (s *Service) deleteBlob(key string) {
	// A failed delete leaves a blob no row names: the blob GC removes it.
	if err := s.blobs.Delete(context.WithoutCancel(context.Background()), key); err != nil {
		s.log.Warn("delete a file's blob; the blob GC will", "key", key, "err", err)
	}
}

// Create stores a file: Stage then Commit.
func (s *Service) Create(ctx context.Context, tenantID string, p CreateParams) (*store.File, error) {
	st, err := s.Stage(ctx, tenantID, p)
	if err != nil {
		return nil, err
	}
	return st.Commit(ctx, 0)
}

// expired reports whether f's bytes are no longer served.
func (s *Service) expired(f *store.File) bool {
	return f.ExpiresAt != nil && !s.now().Before(*f.ExpiresAt)
}

// Get returns the tenant's file; another tenant's, a missing or an
// expired file → an error wrapping store.ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id string) (*store.File, error) {
	f, err := s.st.GetFile(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if s.expired(f) {
		return nil, fmt.Errorf("file %q expired at %s: %w", id, f.ExpiresAt.UTC().Format(time.RFC3339), store.ErrNotFound)
	}
	return f, nil
}

// Open returns the file's bytes (the caller closes them) and its row. The
// reader verifies size and sha256 when read to the end.
func (s *Service) Open(ctx context.Context, tenantID, id string) (io.ReadCloser, *store.File, error) {
	f, err := s.Get(ctx, tenantID, id)
	if err != nil {
		return nil, nil, err
	}
	rc, _, err := s.blobs.Get(ctx, f.BlobKey)
	if err != nil {
		return nil, nil, fmt.Errorf("file %s: read blob: %w", id, err)
	}
	return rc, f, nil
}

// List pages through the tenant's live files (expired ones are left out
// by the query, so a full page means there may be more).
func (s *Service) List(ctx context.Context, p store.ListFilesParams) ([]*store.File, error) {
	p.LiveAt = s.now()
	return s.st.ListFiles(ctx, p)
}

// ListBySession returns the session's live files, oldest first.
func (s *Service) ListBySession(ctx context.Context, tenantID, sessionID string) ([]*store.File, error) {
	if sessionID == "" {
		return nil, fmt.Errorf("files: list by session: no session id: %w", store.ErrInvalid)
	}
	return s.List(ctx, store.ListFilesParams{TenantID: tenantID, ScopeSessionID: sessionID})
}

// Delete deletes the tenant's file: the row first (from then on the file
// is gone), then its bytes.
func (s *Service) Delete(ctx context.Context, tenantID, id string) error {
	f, err := s.st.DeleteFile(ctx, tenantID, id)
	if err != nil {
		return err
	}
	s.deleteBlob(f.BlobKey)
	return nil
}

// limitReader fails the Read that would go past the limit, so the blob
// store's Put fails and commits nothing.
type limitReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One more byte tells a body of exactly the limit from a longer one.
		var b [1]byte
		n, err := l.r.Read(b[:])
		if n > 0 {
			l.over = true
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	// Fill p: a multipart part returns a few KiB per Read, and the blob
	// store writes what each Read returns, so small reads would be as
	// many small write calls.
	// (Not io.ReadFull: it reports a short read as io.ErrUnexpectedEOF,
	// which is also what a truncated part fails with.)
	n := 0
	var err error
	for n < len(p) && err == nil {
		var m int
		m, err = l.r.Read(p[n:])
		n += m
	}
	l.left -= int64(n)
	if n > 0 && err == io.EOF {
		err = nil // the short chunk now, io.EOF on the next Read
	}
	return n, err
}

// filename keeps the last path component of name (either separator), as
// the hosted API does; an empty one becomes "unnamed" plus the MIME
// type's extension.
func filename(name, mimeType string, keepPath bool) string {
	name = strings.ReplaceAll(name, `\`, "/")
	if keepPath {
		if c := path.Clean(name); c != "." && !path.IsAbs(c) && c != ".." && !strings.HasPrefix(c, "../") {
			return c
		}
	}
	base := path.Base(name)
	if name == "" || base == "/" || base == "." || base == ".." {
		return "unnamed" + extension(mimeType)
	}
	return base
}

// preferredExt is the usual extension of types for which the system's
// table lists several in an order that picks an odd one (text/plain →
// .asc).
var preferredExt = map[string]string{
	"text/plain": ".txt", "text/html": ".html", "text/csv": ".csv", "text/markdown": ".md",
	"application/json": ".json", "application/pdf": ".pdf", "image/jpeg": ".jpg", "image/png": ".png",
}

func extension(mimeType string) string {
	mt, _, _ := mime.ParseMediaType(mimeType)
	if ext, ok := preferredExt[mt]; ok {
		return ext
	}
	if exts, _ := mime.ExtensionsByType(mt); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

// mimeType is the client's type unless it is empty or the generic
// application/octet-stream the SDK sends for every reader; then the
// filename's extension decides, then the first bytes.
func mimeType(given, name string, body *bufio.Reader) string {
	if given != "" && given != "application/octet-stream" {
		if mt, params, err := mime.ParseMediaType(given); err == nil {
			return mime.FormatMediaType(mt, params)
		}
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	head, _ := body.Peek(512)
	if len(head) == 0 {
		return "application/octet-stream"
	}
	return http.DetectContentType(head)
}
