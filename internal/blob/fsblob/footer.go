package fsblob

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// footer layout, appended after the blob's bytes:
//
//	size    uint64 big-endian   the number of blob bytes before the footer
//	sha256  [32]byte            of those bytes
//	magic   "AKBLOB01"
//
// The size is checked against the file's length when a blob is opened, so a
// truncated or extended file is refused at once; the sha256 is checked by the
// reader at EOF.
const footerLen = 8 + 32 + 8

var footerMagic = [8]byte{'A', 'K', 'B', 'L', 'O', 'B', '0', '1'}

func encodeFooter(size int64, sum []byte) []byte {
	b := make([]byte, 0, footerLen)
	b = binary.BigEndian.AppendUint64(b, uint64(size))
	b = append(b, sum...)
	return append(b, footerMagic[:]...)
}

// readFooter reads the footer of a blob file of length fileSize and returns
// the recorded size and hex sha256.
func readFooter(r io.ReaderAt, key string, fileSize int64) (int64, string, error) {
	if fileSize < footerLen {
		return 0, "", &blob.CorruptError{Key: key, Reason: fmt.Sprintf("file of %d bytes has no footer", fileSize), GotSize: fileSize}
	}
	var b [footerLen]byte
	if _, err := r.ReadAt(b[:], fileSize-footerLen); err != nil {
		return 0, "", fmt.Errorf("fsblob: read footer of %q: %w", key, err)
	}
	if [8]byte(b[40:48]) != footerMagic {
		return 0, "", &blob.CorruptError{Key: key, Reason: "footer magic missing (truncated or overwritten)", GotSize: fileSize - footerLen}
	}
	size := int64(binary.BigEndian.Uint64(b[0:8]))
	sum := hex.EncodeToString(b[8:40])
	if size != fileSize-footerLen {
		return 0, "", &blob.CorruptError{Key: key, Reason: "file length does not match recorded size",
			WantSize: size, GotSize: fileSize - footerLen, WantSHA256: sum}
	}
	return size, sum, nil
}
