package guest

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// scopedGuest starts a guest whose work dir has a sibling "outside" dir
// holding secret.txt, and returns the client, the work dir and outside.
func scopedGuest(t *testing.T) (*Client, string, string) {
	t.Helper()
	c, work := startGuest(t, nil)
	outside := filepath.Join(filepath.Dir(work), "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	return c, work, outside
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// wantEscape checks that err is the guest's escapes_workspace answer.
func wantEscape(t *testing.T, op string, err error) {
	t.Helper()
	var ge *Error
	if !errors.As(err, &ge) || ge.Code != codeEscapesWorkspace || ge.Status != http.StatusBadRequest || !errors.Is(err, ErrEscapesWorkspace) {
		t.Fatalf("%s: err = %v, want HTTP 400 %s", op, err, codeEscapesWorkspace)
	}
}

func TestFilesSymlinkToOutsideDir(t *testing.T) {
	c, work, outside := scopedGuest(t)
	ctx := context.Background()
	symlink(t, outside, filepath.Join(work, "out"))

	_, err := c.ReadFileMax(ctx, "out/secret.txt", 1<<20)
	wantEscape(t, "read", err)
	_, err = c.ListDir(ctx, work+"/out")
	wantEscape(t, "list", err)
	_, err = c.Stat(ctx, "out/secret.txt")
	wantEscape(t, "stat", err)
	wantEscape(t, "write", c.WriteFile(ctx, WriteFileRequest{Path: "out/new.txt", Data: []byte("x")}))
	wantEscape(t, "mkdir", c.Mkdir(ctx, MkdirRequest{Path: "out/sub/dir"}))
	wantEscape(t, "remove", c.Remove(ctx, RemoveRequest{Path: "out/secret.txt"}))
	wantEscape(t, "remove -r", c.Remove(ctx, RemoveRequest{Path: "out/secret.txt", Recursive: true}))

	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 1 || entries[0].Name() != "secret.txt" {
		t.Fatalf("outside dir changed: %v, %v", entries, err)
	}
	// The link itself is a workspace entry: stat describes it, and listing
	// the workspace shows it without following it.
	fi, err := c.Stat(ctx, "out")
	if err != nil || !fi.IsSymlink {
		t.Fatalf("stat of the link = %+v, %v", fi, err)
	}
	list, err := c.ListDir(ctx, ".")
	if err != nil || len(list) != 1 || !list[0].IsSymlink || list[0].Path != work+"/out" {
		t.Fatalf("list workspace = %+v, %v", list, err)
	}
	// And removing it removes the link, not what it points to.
	if err := c.Remove(ctx, RemoveRequest{Path: "out", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "secret" {
		t.Fatalf("outside file after removing the link = %q, %v", b, err)
	}
}

func TestFilesSymlinkToOutsideFile(t *testing.T) {
	c, work, outside := scopedGuest(t)
	ctx := context.Background()
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(work, "secret"))

	_, err := c.ReadFileMax(ctx, "secret", 1<<20)
	wantEscape(t, "read", err)
	wantEscape(t, "overwrite", c.WriteFile(ctx, WriteFileRequest{Path: work + "/secret", Data: []byte("pwned")}))
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "secret" {
		t.Fatalf("outside file = %q, %v; want it untouched", b, err)
	}
	// The same file by its own absolute path is outside the workspace and
	// stays reachable, as every path outside /workspace does.
	if b, err := c.ReadFileMax(ctx, filepath.Join(outside, "secret.txt"), 1<<20); err != nil || string(b) != "secret" {
		t.Fatalf("read by absolute path = %q, %v", b, err)
	}
}

func TestFilesRelativeSymlinkClimbingOut(t *testing.T) {
	c, work, outside := scopedGuest(t)
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Join(work, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "../../../outside", filepath.Join(work, "a", "b", "up"))

	_, err := c.ReadFileMax(ctx, "a/b/up/secret.txt", 1<<20)
	wantEscape(t, "read", err)
	_, err = c.ListDir(ctx, "a/b/up")
	wantEscape(t, "list", err)
	wantEscape(t, "write", c.WriteFile(ctx, WriteFileRequest{Path: "a/b/up/x", Data: []byte("x")}))
	if _, err := os.Stat(filepath.Join(outside, "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file appeared outside: %v", err)
	}
}

func TestFilesSymlinkInsideWorkspace(t *testing.T) {
	c, work, _ := scopedGuest(t)
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Join(work, "real", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "real", "sub", "f.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, "real/sub", filepath.Join(work, "dirlink"))
	symlink(t, "../real/sub/f.txt", filepath.Join(work, "real", "filelink"))

	if b, err := c.ReadFileMax(ctx, "dirlink/f.txt", 1<<20); err != nil || string(b) != "inside" {
		t.Fatalf("read through dir link = %q, %v", b, err)
	}
	if b, err := c.ReadFileMax(ctx, "real/filelink", 1<<20); err != nil || string(b) != "inside" {
		t.Fatalf("read through file link = %q, %v", b, err)
	}
	if list, err := c.ListDir(ctx, "dirlink"); err != nil || len(list) != 1 || list[0].Name != "f.txt" {
		t.Fatalf("list through link = %+v, %v", list, err)
	}
	if err := c.Mkdir(ctx, MkdirRequest{Path: "dirlink/made"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(work, "real", "sub", "made")); err != nil || !fi.IsDir() {
		t.Fatalf("mkdir through link: %v", err)
	}
	// Writing through a file link writes its target and keeps the link.
	if err := c.WriteFile(ctx, WriteFileRequest{Path: "real/filelink", Data: []byte("rewritten")}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "real", "sub", "f.txt")); string(b) != "rewritten" {
		t.Fatalf("target after write through link = %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(work, "real", "filelink")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("link replaced by the write: %v", err)
	}
	if err := c.WriteFile(ctx, WriteFileRequest{Path: "dirlink/new.txt", Data: []byte("n")}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "real", "sub", "new.txt")); string(b) != "n" {
		t.Fatalf("write into linked dir = %q", b)
	}
}

func TestFilesDanglingSymlinkOutside(t *testing.T) {
	c, work, outside := scopedGuest(t)
	ctx := context.Background()
	absTarget := filepath.Join(outside, "created-abs")
	symlink(t, absTarget, filepath.Join(work, "dangling-abs"))
	symlink(t, "../outside/created-rel", filepath.Join(work, "dangling-rel"))

	wantEscape(t, "write abs", c.WriteFile(ctx, WriteFileRequest{Path: "dangling-abs", Data: []byte("x")}))
	wantEscape(t, "write rel", c.WriteFile(ctx, WriteFileRequest{Path: "dangling-rel", Data: []byte("x")}))
	wantEscape(t, "mkdir", c.Mkdir(ctx, MkdirRequest{Path: "dangling-abs/sub"}))
	for _, name := range []string{"created-abs", "created-rel", "sub"} {
		if _, err := os.Lstat(filepath.Join(outside, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created outside the workspace: %v", name, err)
		}
	}
	// A dangling link that points inside is followed: the write creates
	// its target.
	symlink(t, "later.txt", filepath.Join(work, "dangling-in"))
	if err := c.WriteFile(ctx, WriteFileRequest{Path: "dangling-in", Data: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "later.txt")); err != nil || string(b) != "ok" {
		t.Fatalf("target of inside dangling link = %q, %v", b, err)
	}
}

func TestFilesDotDotRefused(t *testing.T) {
	c, work, outside := scopedGuest(t)
	ctx := context.Background()
	for _, p := range []string{"../outside/secret.txt", work + "/../outside/secret.txt", "a/../b", outside + "/../outside/secret.txt"} {
		_, err := c.ReadFileMax(ctx, p, 1<<20)
		var ge *Error
		if !errors.As(err, &ge) || ge.Code != codeBadRequest || ge.Status != http.StatusBadRequest {
			t.Errorf("ReadFile(%q) = %v, want 400 bad_request", p, err)
		}
	}
	if err := c.WriteFile(ctx, WriteFileRequest{Path: "../outside/x", Data: []byte("x")}); err == nil {
		t.Fatal("write with .. accepted")
	}
	if err := c.Remove(ctx, RemoveRequest{Path: "../outside", Recursive: true}); err == nil {
		t.Fatal("remove with .. accepted")
	}
	if _, err := os.Stat(filepath.Join(outside, "secret.txt")); err != nil {
		t.Fatal(err)
	}
}

// Paths outside the work dir keep working, symlinks and all.
func TestFilesOutsideWorkDir(t *testing.T) {
	c, _, outside := scopedGuest(t)
	ctx := context.Background()
	symlink(t, "secret.txt", filepath.Join(outside, "alias"))
	if b, err := c.ReadFileMax(ctx, outside+"/alias", 1<<20); err != nil || string(b) != "secret" {
		t.Fatalf("read outside via link = %q, %v", b, err)
	}
	if err := c.WriteFile(ctx, WriteFileRequest{Path: outside + "/d/new.txt", Data: []byte("n")}); err != nil {
		t.Fatal(err)
	}
	if list, err := c.ListDir(ctx, outside); err != nil || len(list) != 3 {
		t.Fatalf("list outside = %+v, %v", list, err)
	}
}
