package snapshot

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkSnapshot100MB compares Write/Replace on a 100 MB tree with
// `tar | zstd -1` and `zstd -d | tar -x` on the same tree, in one run, so
// the ratio is meaningful on a noisy machine. Each reports MB/s.
//
//	go test -run '^$' -bench Snapshot100MB -benchtime 5x ./internal/snapshot/
func BenchmarkSnapshot100MB(b *testing.B) {
	ctx := context.Background()
	src := b.TempDir()
	makeTree(b, src, 3, 100<<20)
	const size = 100 << 20
	archive := filepath.Join(b.TempDir(), "ws.tar.zst")
	cliArchive := filepath.Join(b.TempDir(), "cli.tar.zst")

	b.Run("write/agentkernel", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			f, err := os.Create(archive)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Write(ctx, src, f, WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("write/tar|zstd-1", func(b *testing.B) {
		if _, err := exec.LookPath("zstd"); err != nil {
			b.Skip("zstd CLI not installed")
		}
		b.SetBytes(size)
		for b.Loop() {
			cmd := exec.Command("sh", "-c", "tar -cf - -C \"$1\" . | zstd -1 -q -f -o \"$2\"", "sh", src, cliArchive)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
	b.Run("restore/agentkernel", func(b *testing.B) {
		b.SetBytes(size)
		dst := filepath.Join(b.TempDir(), "ws")
		for b.Loop() {
			f, err := os.Open(archive)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Replace(ctx, f, dst); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("restore/zstd-d|tar-x", func(b *testing.B) {
		if _, err := exec.LookPath("zstd"); err != nil {
			b.Skip("zstd CLI not installed")
		}
		b.SetBytes(size)
		parent := b.TempDir()
		for b.Loop() {
			dst := filepath.Join(parent, "ws")
			os.RemoveAll(dst)
			os.Mkdir(dst, 0o755)
			cmd := exec.Command("sh", "-c", "zstd -d -q -c \"$1\" | tar -xf - -C \"$2\"", "sh", cliArchive, dst)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
	b.Run("verify/agentkernel", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			f, _ := os.Open(archive)
			if _, err := Verify(ctx, f); err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, f)
			f.Close()
		}
	})
}
