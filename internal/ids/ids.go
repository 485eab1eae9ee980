// Package ids makes the identifiers agentkernel hands out: a short prefix that
// names the kind (sesn_, run_, cp_, key_, …) followed by a 26-character,
// time-ordered, Crockford base32 body (48 bits of milliseconds, 80 random
// bits), so ids sort by creation time and page cleanly.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

var (
	mu       sync.Mutex
	lastMS   uint64
	lastRand [10]byte
)

// New returns prefix + "_" + a fresh time-ordered id. Ids made in the same
// millisecond by this process still sort in creation order.
func New(prefix string) string {
	return prefix + "_" + body(time.Now())
}

func body(now time.Time) string {
	ms := uint64(now.UnixMilli())
	mu.Lock()
	var r [10]byte
	if ms <= lastMS {
		// Same (or earlier, clock step) millisecond: increment the random
		// part so order is kept within this process.
		ms = lastMS
		r = lastRand
		for i := len(r) - 1; i >= 0; i-- {
			r[i]++
			if r[i] != 0 {
				break
			}
		}
	} else {
		_, _ = rand.Read(r[:])
	}
	lastMS, lastRand = ms, r
	mu.Unlock()

	var b [16]byte
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	copy(b[6:], r[:])
	return encode(b)
}

// encode writes 128 bits as 26 base32 characters (the top 2 bits padded).
func encode(b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}
