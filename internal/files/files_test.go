package files_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/files"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// countingBlobs counts the bytes Put has taken from its reader so far.
type countingBlobs struct {
	blob.Store
	taken int64
}

func (c *countingBlobs) Put(ctx context.Context, key string, r io.Reader) (blob.Info, error) {
	return c.Store.Put(ctx, key, readFunc(func(p []byte) (int, error) {
		n, err := r.Read(p)
		c.taken += int64(n)
		return n, err
	}))
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

// tail is the end of a body: its first Read fails the test unless the
// blob store already took the bytes before it — a Create that read the
// whole body before writing any of it (buffering it) fails here.
type tail struct {
	t      *testing.T
	blobs  *countingBlobs
	before int64
	done   bool
}

func (r *tail) Read(p []byte) (int, error) {
	if !r.done && r.blobs.taken < r.before-64<<10 {
		r.t.Errorf("the body's end was read when the blob store had only %d of the first %d bytes: Create buffers", r.blobs.taken, r.before)
	}
	r.done = true
	return 0, io.EOF
}

func newService(t *testing.T, max int64) (*files.Service, *countingBlobs, store.FileStore) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/state.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fb, err := fsblob.Open(context.Background(), t.TempDir(), fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cb := &countingBlobs{Store: fb}
	return files.New(files.Config{Store: st, Blobs: cb, MaxBytes: max}), cb, st
}

func TestCreateStreams(t *testing.T) {
	ctx := context.Background()
	s, cb, _ := newService(t, 64<<20)
	head := bytes.Repeat([]byte{'a'}, 8<<20)
	f, err := s.Create(ctx, "t1", files.CreateParams{Filename: "a.bin", Body: io.MultiReader(bytes.NewReader(head), &tail{t: t, blobs: cb, before: int64(len(head))})})
	if err != nil || f.SizeBytes != int64(len(head)) || f.SHA256 == "" {
		t.Fatalf("create: %+v %v", f, err)
	}
	rc, got, err := s.Open(ctx, "t1", f.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(b, head) || got.ID != f.ID {
		t.Fatalf("read back %d bytes, %v", len(b), err)
	}
	if _, _, err := s.Open(ctx, "t2", f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant opened the file: %v", err)
	}
}

func TestCreateTooLargeLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s, cb, st := newService(t, 1000)
	_, err := s.Create(ctx, "t1", files.CreateParams{Filename: "a.bin", Body: bytes.NewReader(make([]byte, 1001))})
	if !errors.Is(err, files.ErrTooLarge) {
		t.Fatalf("1001 bytes over a limit of 1000: %v, want ErrTooLarge", err)
	}
	list, err := st.ListFiles(ctx, store.ListFilesParams{TenantID: "t1"})
	if err != nil || len(list) != 0 {
		t.Fatalf("rows after a refused create: %v %v", list, err)
	}
	for info, err := range cb.List(ctx, "") {
		t.Fatalf("blob after a refused create: %v %v", info, err)
	}
	f, err := s.Create(ctx, "t1", files.CreateParams{Filename: "b.bin", Body: bytes.NewReader(make([]byte, 1000))})
	if err != nil || f.SizeBytes != 1000 {
		t.Fatalf("exactly the limit: %+v %v", f, err)
	}
}

// A body that fails part-way (a truncated multipart part fails with
// io.ErrUnexpectedEOF) fails Create; it is not taken as a short file.
func TestCreateBodyErrorFails(t *testing.T) {
	ctx := context.Background()
	s, cb, _ := newService(t, 1<<20)
	body := io.MultiReader(bytes.NewReader([]byte("abc")), readFunc(func([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }))
	if _, err := s.Create(ctx, "t1", files.CreateParams{Filename: "a", Body: body}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("create from a failing body: %v, want io.ErrUnexpectedEOF", err)
	}
	for info, err := range cb.List(ctx, "") {
		t.Fatalf("blob after a failed create: %v %v", info, err)
	}
}
