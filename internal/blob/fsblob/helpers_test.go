package fsblob

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"testing"
)

func openTest(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// genReader streams size deterministic pseudo-random bytes derived from seed,
// without holding them, and counts what it served. The first 8 bytes are the
// seed, so a blob says which generation it is.
type genReader struct {
	rng    *rand.ChaCha8
	seed   uint64
	size   int64
	served int64
	// onRead, when set, runs before each Read with the bytes served so far.
	onRead func(served int64)
}

func newGen(seed uint64, size int64) *genReader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return &genReader{rng: rand.NewChaCha8(key), seed: seed, size: size}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.onRead != nil {
		g.onRead(g.served)
	}
	if g.served >= g.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.size-g.served)]
	g.rng.Read(p)
	// Stamp the seed over the first 8 bytes of the stream.
	for i := g.served; i < 8 && i-g.served < int64(len(p)); i++ {
		p[i-g.served] = byte(g.seed >> (8 * i))
	}
	g.served += int64(len(p))
	return len(p), nil
}

// genSHA256 is the sha256 of newGen(seed, size)'s stream.
func genSHA256(seed uint64, size int64) string {
	h := sha256.New()
	io.CopyBuffer(h, newGen(seed, size), make([]byte, 1<<20))
	return hex.EncodeToString(h.Sum(nil))
}
