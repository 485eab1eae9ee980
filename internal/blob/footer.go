package blob

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// The footer every engine appends after a blob's bytes, so that the size and
// sha256 recorded while the blob was written are published by the same
// atomic step as the bytes (one rename, one S3 object): there is no moment,
// and no crash, in which data and checksum disagree. A writer streaming a
// blob of unknown length only knows the checksum at the end, which rules out
// a header or S3 object metadata (sent before the body).
//
//	size    uint64 big-endian   the number of blob bytes before the footer
//	sha256  [32]byte            of those bytes
//	magic   "AKBLOB01"
//
// One format for every engine: a stored object copied between backends
// (an fsblob file to an S3 object) reads the same.
const FooterLen = 8 + 32 + 8

var footerMagic = [8]byte{'A', 'K', 'B', 'L', 'O', 'B', '0', '1'}

// AppendFooter appends the footer of a blob of size bytes with sha256 sum.
func AppendFooter(b []byte, size int64, sum []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(size))
	b = append(b, sum...)
	return append(b, footerMagic[:]...)
}

// ParseFooter checks footer, the last FooterLen bytes of key's stored
// object of storedSize bytes (footer included), and returns the recorded
// blob size and hex sha256. A short object, a missing magic or a size that
// does not match the object's length is a *CorruptError: the object was
// truncated, extended or not written by an engine.
func ParseFooter(key string, footer []byte, storedSize int64) (int64, string, error) {
	if storedSize < FooterLen || len(footer) != FooterLen {
		return 0, "", &CorruptError{Key: key, Reason: fmt.Sprintf("stored object of %d bytes has no footer", storedSize), GotSize: storedSize}
	}
	if [8]byte(footer[40:48]) != footerMagic {
		return 0, "", &CorruptError{Key: key, Reason: "footer magic missing (truncated or overwritten)", GotSize: storedSize - FooterLen}
	}
	size := int64(binary.BigEndian.Uint64(footer[0:8]))
	sum := hex.EncodeToString(footer[8:40])
	if size != storedSize-FooterLen {
		return 0, "", &CorruptError{Key: key, Reason: "stored length does not match recorded size",
			WantSize: size, GotSize: storedSize - FooterLen, WantSHA256: sum}
	}
	return size, sum, nil
}
