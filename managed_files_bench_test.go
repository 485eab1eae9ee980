package agentkernel_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/files"
)

// BenchmarkFilesThroughput compares the Files API with cp of the same file
// on the same disk (the daemon's home and the source file share one
// filesystem): upload is a streamed multipart POST /v1/files (the blob is
// fsynced before the answer); download is GET /content into a file. cp does
// not fsync; "cp+sync" does, like the upload; "dd+fsync" copies through
// user space, as any server must.
//
//	go test -run '^$' -bench BenchmarkFilesThroughput -benchtime=3x .
func BenchmarkFilesThroughput(b *testing.B) {
	const size = 256 << 20
	dir := b.TempDir()
	src := filepath.Join(dir, "src.bin")
	f, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	f.Close()
	d := daemontest.Start(b, func(c *config.Config) {
		c.Home = filepath.Join(dir, "home") // same disk as src
		c.Files.MaxUploadBytes = 1 << 30
	})

	b.Run("cp", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			dst := filepath.Join(dir, fmt.Sprintf("cp%d", i))
			if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
			os.Remove(dst) // keep what each run leaves dirty in the page cache alike
		}
	})
	b.Run("cp+sync", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			dst := filepath.Join(dir, fmt.Sprintf("cps%d", i))
			if out, err := exec.Command("sh", "-c", `cp "$1" "$2" && sync "$2"`, "sh", src, dst).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
			os.Remove(dst)
		}
	})
	// dd moves the bytes through user space as the daemon must (cp 9.x
	// copies inside the kernel with copy_file_range), and fsyncs.
	b.Run("dd+fsync", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			dst := filepath.Join(dir, fmt.Sprintf("dd%d", i))
			if out, err := exec.Command("dd", "if="+src, "of="+dst, "bs=1M", "conv=fsync", "status=none").CombinedOutput(); err != nil {
				b.Fatalf("dd: %v %s", err, out)
			}
			os.Remove(dst)
		}
	})
	b.Run("upload", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			go func() {
				part, err := mw.CreateFormFile("file", "src.bin")
				if err == nil {
					var in *os.File
					if in, err = os.Open(src); err == nil {
						_, err = io.Copy(part, in)
						in.Close()
					}
				}
				if err == nil {
					err = mw.Close()
				}
				pw.CloseWithError(err)
			}()
			req, _ := http.NewRequest("POST", d.URL+"/v1/files", pr)
			req.Header.Set("x-api-key", d.AdminKey)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var meta struct{ ID string }
			err = json.NewDecoder(resp.Body).Decode(&meta)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("upload: %d %v", resp.StatusCode, err)
			}
			b.StopTimer()
			del, _ := http.NewRequest("DELETE", d.URL+"/v1/files/"+meta.ID, nil)
			del.Header.Set("x-api-key", d.AdminKey)
			if resp, err := http.DefaultClient.Do(del); err == nil {
				resp.Body.Close()
			}
			b.StartTimer()
		}
	})
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	// Uploads are not downloadable (as the SDK defines it); a session's
	// output is, so the file to download is stored as one.
	tenantID, key := fileTenant(b, d, "bench")
	dl, err := d.Files().Create(context.Background(), tenantID, files.CreateParams{Filename: "src.bin", Body: in, Downloadable: true})
	in.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("download", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			req, _ := http.NewRequest("GET", d.URL+"/v1/files/"+dl.ID+"/content", nil)
			req.Header.Set("x-api-key", key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			out, err := os.Create(filepath.Join(dir, fmt.Sprintf("dl%d", i)))
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(out, resp.Body)
			resp.Body.Close()
			out.Close()
			os.Remove(out.Name())
			if err != nil || n != size || resp.StatusCode != 200 {
				b.Fatalf("download: %d bytes, %d, %v", n, resp.StatusCode, err)
			}
		}
	})
}
