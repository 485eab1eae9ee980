package crashtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"path/filepath"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
)

// TestFileUploadKilledBeforeItsRow: an upload whose bytes are stored but
// whose row is not (the daemon SIGKILLed at file-record-hang, so the
// client never got an answer) leaves no file; a file acknowledged before
// the kill keeps its metadata and every byte.
func TestFileUploadKilledBeforeItsRow(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		n := newNode(t, engine, "http://127.0.0.1:1")
		n.start()
		c := n.client()

		kept := make([]byte, 1<<20)
		_, _ = rand.Read(kept)
		acked, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(bytes.NewReader(kept), "kept.bin", "")})
		if err != nil {
			t.Fatal(err)
		}

		n.arm("file-record-hang")
		done := make(chan error, 1)
		go func() {
			_, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(bytes.NewReader(make([]byte, 1<<20)), "lost.bin", "")})
			done <- err
		}()
		n.waitReached("file-record-hang")
		n.kill()
		if err := <-done; err == nil {
			t.Fatal("the upload cut off by the kill was acknowledged")
		}
		n.disarm("file-record-hang")

		n.start()
		c = n.client()
		list, err := c.Beta.Files.List(ctx, anthropic.BetaFileListParams{})
		if err != nil || len(list.Data) != 1 || list.Data[0].ID != acked.ID || list.Data[0].SizeBytes != int64(len(kept)) {
			t.Fatalf("files after the kill: %s %v (want only %s)", list.RawJSON(), err, acked.ID)
		}
		n.stop()

		// Every acknowledged byte is on disk, as its sha256 says.
		blobs, err := fsblob.Open(ctx, filepath.Join(n.home, "blobs"), fsblob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rc, info, err := blobs.Get(ctx, "files/"+acked.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		want := sha256.Sum256(kept)
		if err != nil || !bytes.Equal(got, kept) || info.SHA256 != hex.EncodeToString(want[:]) {
			t.Fatalf("acknowledged file's blob: %d bytes, sha256 %s, %v", len(got), info.SHA256, err)
		}
	})
}
