package safetar

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Magic numbers of the compressions NewReader reads or names.
var (
	magicGzip = []byte{0x1f, 0x8b}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicXz   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicBz2  = []byte("BZh")
)

// NewReader returns a tar reader over r, which may be a plain tar or a
// gzip- or zstd-compressed one (told apart by magic bytes). Call the
// returned func when done. Decompression is only as large as what the
// extractor reads, so Options.MaxBytes bounds a compression bomb too.
func NewReader(r io.Reader) (*tar.Reader, func(), error) {
	dr, closeFn, err := Decompress(r)
	if err != nil {
		return nil, nil, err
	}
	return tar.NewReader(dr), closeFn, nil
}

// Decompress sniffs r's first bytes and returns the uncompressed stream.
func Decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(6)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	switch {
	case bytes.HasPrefix(head, magicGzip):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: gzip: %w", ErrMalformed, err)
		}
		return zr, func() { zr.Close() }, nil
	case bytes.HasPrefix(head, magicZstd):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: zstd: %w", ErrMalformed, err)
		}
		return zr, zr.Close, nil
	case bytes.HasPrefix(head, magicXz), bytes.HasPrefix(head, magicBz2):
		return nil, nil, fmt.Errorf("%w: xz and bzip2 tarballs are not supported: decompress it first (unxz / bunzip2) or recompress with gzip or zstd", ErrMalformed)
	}
	return br, func() {}, nil
}
