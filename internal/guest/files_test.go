package guest

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestFilesRoundTrip(t *testing.T) {
	c, work := startGuest(t, nil)
	ctx := context.Background()
	if err := c.WriteFile(ctx, WriteFileRequest{Path: "a/b/hello.txt", Data: []byte("hi"), Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(work + "/a/b/hello.txt")
	if err != nil || string(got) != "hi" {
		t.Fatalf("host file = %q, %v", got, err)
	}
	data, err := c.ReadFileMax(ctx, work+"/a/b/hello.txt", 1<<20)
	if err != nil || string(data) != "hi" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	fi, err := c.Stat(ctx, "a/b/hello.txt")
	if err != nil || fi.Size != 2 || fi.Mode != 0o600 || fi.IsDir {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	// Overwrite is atomic and leaves no temp files behind.
	if err := c.WriteFile(ctx, WriteFileRequest{Path: "a/b/hello.txt", Data: []byte("bye")}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListDir(ctx, "a/b")
	if err != nil || len(list) != 1 || list[0].Name != "hello.txt" || list[0].Size != 3 || list[0].Mode != 0o644 {
		t.Fatalf("ListDir = %+v, %v", list, err)
	}

	if err := c.Mkdir(ctx, MkdirRequest{Path: "x/y/z"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(ctx, "x/y/z"); err != nil || !fi.IsDir {
		t.Fatalf("Stat dir = %+v, %v", fi, err)
	}
	if err := c.Remove(ctx, RemoveRequest{Path: "x"}); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("non-recursive remove of a tree: %v, want ENOTEMPTY", err)
	}
	if err := c.Remove(ctx, RemoveRequest{Path: "x", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after remove: %v", err)
	}
	if err := c.Remove(ctx, RemoveRequest{Path: "x"}); err != nil {
		t.Fatalf("removing a missing path: %v", err)
	}
}

func TestFilesErrors(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx := context.Background()
	if _, err := c.ReadFileMax(ctx, "missing", 1<<20); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile missing: %v", err)
	}
	if _, err := c.ListDir(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ListDir missing: %v", err)
	}
	if err := c.Mkdir(ctx, MkdirRequest{Path: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadFileMax(ctx, "d", 1<<20); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("ReadFile dir: %v", err)
	}
	if err := c.WriteFile(ctx, WriteFileRequest{Path: "d", Data: []byte("x")}); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("WriteFile over a dir: %v", err)
	}
	if err := c.Remove(ctx, RemoveRequest{Path: ".", Recursive: true}); err == nil {
		t.Fatal("removing the work dir must be refused")
	}
}

func TestProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	obj := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Method", r.Method)
		_, _ = io.WriteString(w, r.URL.Path+"?"+r.URL.RawQuery+" "+string(body))
	})}
	go func() { _ = obj.Serve(ln) }()
	defer obj.Close()

	c, _ := startGuest(t, func(cfg *Config) { cfg.ProxyTarget = "http://" + ln.Addr().String() })
	resp, err := c.ProxyClient().Post("http://object/increment?by=2", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `/increment?by=2 {"n":1}` || resp.Header.Get("X-Method") != "POST" {
		t.Fatalf("proxied body = %q", body)
	}

	// An object server that is not listening is a 502, not a hang.
	c2, _ := startGuest(t, func(cfg *Config) { cfg.ProxyTarget = "http://127.0.0.1:1" })
	resp, err = c2.ProxyClient().Get("http://object/__health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status = %d, want 502", resp.StatusCode)
	}
}

// TestFileErrnosAreCallerErrors: every errno the files API names for a
// caller maps to a 4xx (or 507 for a full disk), with a code, never to 500.
func TestFileErrnosAreCallerErrors(t *testing.T) {
	want := map[syscall.Errno]int{
		syscall.ENOENT: 404, syscall.ENOTEMPTY: 409, syscall.EEXIST: 409, syscall.EROFS: 403,
		syscall.EACCES: 403, syscall.EPERM: 403, syscall.ENAMETOOLONG: 400, syscall.ELOOP: 400,
		syscall.ENOTDIR: 409, syscall.EISDIR: 409, syscall.ENOSPC: 507, syscall.EDQUOT: 507,
		syscall.EFBIG: 413, syscall.ENXIO: 400, syscall.EBUSY: 409, syscall.ETXTBSY: 409, syscall.EINVAL: 400,
	}
	tgt := &fileTarget{path: "/workspace/f"}
	for _, e := range errnoText {
		err := tgt.wrap(&os.PathError{Op: "openat", Path: ".f.tmp", Err: e.errno})
		status, code := errorStatus(err)
		if status != want[e.errno] || code == codeInternal {
			t.Errorf("%v: %d %s, want %d", e.errno, status, code, want[e.errno])
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "/workspace/f: ") || strings.Contains(msg, ".tmp") {
			t.Errorf("%v: message %q does not speak of the path asked for", e.errno, msg)
		}
	}
	if len(want) != len(errnoText) {
		t.Errorf("%d errnos have text, %d an expected status", len(errnoText), len(want))
	}
}
