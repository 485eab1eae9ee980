package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
)

// verifyingReader hashes and counts what it passes on and, at the end of the
// stream, compares that with what Put recorded. Engines wrap their raw
// readers in it so every backend verifies the same way.
type verifyingReader struct {
	ctx  context.Context
	r    io.Reader
	c    io.Closer
	want Info
	h    hash.Hash
	n    int64
	err  error // sticky: once verification failed, every Read repeats it
}

// NewVerifyingReader returns a ReadCloser over rc that returns a
// *CorruptError (wrapping ErrCorrupt) instead of io.EOF when the bytes read do
// not have want.Size and want.SHA256. It reads at most want.Size+1 bytes from
// rc, so a source longer than recorded is caught without draining it. Read
// also fails once ctx is done.
func NewVerifyingReader(ctx context.Context, rc io.ReadCloser, want Info) io.ReadCloser {
	return &verifyingReader{
		ctx:  ctx,
		r:    io.LimitReader(rc, want.Size+1),
		c:    rc,
		want: want,
		h:    sha256.New(),
	}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if err := v.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.n > v.want.Size {
		v.err = &CorruptError{Key: v.want.Key, Reason: "longer than recorded",
			WantSize: v.want.Size, GotSize: v.n, WantSHA256: v.want.SHA256}
		// Do not hand out the byte past the recorded end.
		return n - int(v.n-v.want.Size), v.err
	}
	if err == io.EOF {
		v.err = v.check()
		return n, v.err
	}
	return n, err
}

func (v *verifyingReader) check() error {
	if v.n != v.want.Size {
		return &CorruptError{Key: v.want.Key, Reason: "shorter than recorded",
			WantSize: v.want.Size, GotSize: v.n, WantSHA256: v.want.SHA256}
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want.SHA256 {
		return &CorruptError{Key: v.want.Key, Reason: "sha256 mismatch",
			WantSize: v.want.Size, GotSize: v.n, WantSHA256: v.want.SHA256, GotSHA256: got}
	}
	return io.EOF
}

func (v *verifyingReader) Close() error { return v.c.Close() }
