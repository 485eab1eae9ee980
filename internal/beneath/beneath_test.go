package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpenFollowsNoSymlink(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(host, "secret"), []byte("HOST"), 0o600)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "ok"), []byte("mine"), 0o600)
	os.Symlink(filepath.Join(host, "secret"), filepath.Join(dir, "abs"))
	os.Symlink("sub/ok", filepath.Join(dir, "rel")) // even one that stays inside
	os.Symlink(host, filepath.Join(dir, "hostdir"))
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b, err := ReadFile(d, "sub/ok", 100); err != nil || string(b) != "mine" {
		t.Fatalf("sub/ok = %q, %v", b, err)
	}
	for _, name := range []string{"abs", "rel", "hostdir/secret", "../" + filepath.Base(dir) + "/sub/ok", "/etc/passwd"} {
		if b, err := ReadFile(d, name, 100); err == nil {
			t.Errorf("%s: read %q through a symlink or out of the directory", name, b)
		}
	}
	if _, err := ReadFile(d, "abs", 100); !errors.Is(err, ErrSymlink) {
		t.Errorf("abs: %v, want ErrSymlink", err)
	}
	// Creating through a symlink creates nothing.
	os.Symlink(filepath.Join(host, "new"), filepath.Join(dir, "dangling"))
	if f, err := Open(d, "dangling", os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
		f.Close()
		t.Error("created a file through a dangling symlink")
	}
	if _, err := os.Stat(filepath.Join(host, "new")); err == nil {
		t.Error("a host file was created")
	}
	// A symlinked directory given to OpenDir is refused too.
	if d2, err := OpenDir(filepath.Join(dir, "hostdir")); err == nil {
		d2.Close()
		t.Error("OpenDir followed a symlink")
	}
}

func TestReadFileNeverBlocksOnAFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := ReadFile(d, "fifo", 10); err == nil {
		t.Fatal("read a FIFO")
	}
}
