package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// ErrUnknownKind: OpID was asked for a kind not in Kinds. A new kind must
// be listed there, with its recovery rule in Decide and RecoveryRules, before it can
// be journalled.
var ErrUnknownKind = errors.New("unknown op kind")

// OpID derives the journal id of an op: "op_" and the hex SHA-256 of the
// kind, the canonical JSON of args (see Canonical) and the position (the
// turn's sequence number, the step, the call's index in the step). Fields
// are length-prefixed, so no two different inputs share a hashed text.
func OpID(kind string, args any, turnSeq, step, index int64) (string, error) {
	if !slices.Contains(Kinds, kind) {
		return "", fmt.Errorf("journal: op kind %q (known: %v): %w", kind, Kinds, ErrUnknownKind)
	}
	if turnSeq < 0 || step < 0 || index < 0 {
		return "", fmt.Errorf("journal: position (turn %d, step %d, index %d) must not be negative", turnSeq, step, index)
	}
	canon, err := Canonical(args)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(kind), canon} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	for _, p := range []int64{turnSeq, step, index} {
		binary.BigEndian.PutUint64(n[:], uint64(p))
		h.Write(n[:])
	}
	return "op_" + hex.EncodeToString(h.Sum(nil)), nil
}
