package fsblob

import (
	"fmt"
	"io"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// footerLen: each blob file is the blob's bytes followed by blob's footer
// (blob.AppendFooter). The size is checked against the file's length when a
// blob is opened, so a truncated or extended file is refused at once; the
// sha256 is checked by the reader at EOF.
const footerLen = blob.FooterLen

// readFooter reads the footer of a blob file of length fileSize and returns
// the recorded size and hex sha256.
func readFooter(r io.ReaderAt, key string, fileSize int64) (int64, string, error) {
	if fileSize < footerLen {
		return blob.ParseFooter(key, nil, fileSize)
	}
	var b [footerLen]byte
	if _, err := r.ReadAt(b[:], fileSize-footerLen); err != nil {
		return 0, "", fmt.Errorf("fsblob: read footer of %q: %w", key, err)
	}
	return blob.ParseFooter(key, b[:], fileSize)
}
