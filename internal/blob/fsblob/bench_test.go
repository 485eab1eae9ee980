package fsblob

import (
	"context"
	"io"
	"testing"
)

const benchSize = 100 << 20

// BenchmarkPut100MB measures Put throughput (including both fsyncs) from a
// generated stream; the generator's own cost is included, so the figure is a
// lower bound.
func BenchmarkPut100MB(b *testing.B) {
	s := openTest(b, b.TempDir())
	ctx := context.Background()
	b.SetBytes(benchSize)
	for b.Loop() {
		if _, err := s.Put(ctx, "bench/put", newGen(1, benchSize)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet100MB measures a full verified read (sha256 included).
func BenchmarkGet100MB(b *testing.B) {
	s := openTest(b, b.TempDir())
	ctx := context.Background()
	if _, err := s.Put(ctx, "bench/get", newGen(1, benchSize)); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(benchSize)
	for b.Loop() {
		rc, _, err := s.Get(ctx, "bench/get")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyBuffer(io.Discard, rc, buf); err != nil {
			b.Fatal(err)
		}
		rc.Close()
	}
}
