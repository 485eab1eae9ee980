package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// entry is one tar entry for tarball.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.link, ModTime: time.Unix(1_700_000_000, 0)}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func rootfs(t *testing.T) []byte {
	return tarball(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "./bin/", typ: tar.TypeDir},
		entry{name: "./bin/tool", body: "#!/bin/sh\n", mode: 0o4755},
		entry{name: "./bin/alias", typ: tar.TypeLink, link: "./bin/tool"},
		entry{name: "./sbin", typ: tar.TypeSymlink, link: "bin"},
		entry{name: "./etc/os-release", body: "ID=test\n"},
		entry{name: "./etc/localtime", typ: tar.TypeSymlink, link: "/usr/share/zoneinfo/UTC"},
		entry{name: "./dev/null", typ: tar.TypeChar},
		entry{name: "./ro/", typ: tar.TypeDir, mode: 0o555},
		entry{name: "./ro/f", body: "x", mode: 0o444},
		entry{name: "./tmp/", typ: tar.TypeDir, mode: 0o1777},
	)
}

func TestImportFormats(t *testing.T) {
	raw := rootfs(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	var zst bytes.Buffer
	enc, err := zstd.NewWriter(&zst)
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(raw)
	enc.Close()

	ctx := context.Background()
	images := filepath.Join(t.TempDir(), "images") // created by Import
	for name, data := range map[string][]byte{"plain": raw, "gz": gz.Bytes(), "zst": zst.Bytes()} {
		info, err := Import(ctx, images, name, bytes.NewReader(data), false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dir := filepath.Join(images, name)
		if info.Name != name || info.Path != dir || info.Files != 3 || info.Symlinks != 2 || info.Dirs != 4 || info.Skipped != 1 || info.Bytes != 19 {
			t.Fatalf("%s: info = %+v", name, info)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "etc", "os-release")); err != nil || string(b) != "ID=test\n" {
			t.Fatalf("%s: os-release = %q, %v", name, b, err)
		}
		fi, err := os.Stat(filepath.Join(dir, "bin", "tool"))
		if err != nil || fi.Mode() != 0o755 {
			t.Fatalf("%s: bin/tool mode = %v, %v; want 0755 without setuid", name, fi.Mode(), err)
		}
		alias, _ := os.Stat(filepath.Join(dir, "bin", "alias"))
		if !os.SameFile(fi, alias) {
			t.Fatalf("%s: hard link not preserved", name)
		}
		if l, err := os.Readlink(filepath.Join(dir, "etc", "localtime")); err != nil || l != "/usr/share/zoneinfo/UTC" {
			t.Fatalf("%s: absolute symlink = %q, %v", name, l, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "dev", "null")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: device node created: %v", name, err)
		}
		if fi, _ := os.Stat(filepath.Join(dir, "ro")); fi.Mode().Perm() != 0o555 {
			t.Fatalf("%s: ro mode = %v", name, fi.Mode())
		}
		if fi, _ := os.Stat(filepath.Join(dir, "tmp")); fi.Mode()&fs.ModeSticky == 0 {
			t.Fatalf("%s: tmp lost its sticky bit: %v", name, fi.Mode())
		}
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: rootfs mode = %v", name, fi.Mode())
		}
	}

	list, err := List(ctx, images)
	if err != nil || len(list) != 3 || list[0].Name != "gz" || list[1].Name != "plain" || list[2].Name != "zst" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if list[1].Files != 3 || list[1].Bytes != 19 || list[1].ImportedAt.IsZero() {
		t.Fatalf("List info = %+v", list[1])
	}
	if err := Remove(ctx, images, "gz"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(ctx, images, "gz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Remove = %v, want ErrNotFound", err)
	}
	assertOnly(t, images, "plain", "zst")
}

// assertOnly checks that imagesDir holds exactly names: no temp dirs left.
func assertOnly(t *testing.T, imagesDir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(imagesDir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("images dir holds %v, want %v", got, names)
	}
}

func TestImportExistingName(t *testing.T) {
	ctx := context.Background()
	images := t.TempDir()
	if _, err := Import(ctx, images, "base", bytes.NewReader(tarball(t, entry{name: "v1", body: "1"})), false); err != nil {
		t.Fatal(err)
	}
	_, err := Import(ctx, images, "base", bytes.NewReader(tarball(t, entry{name: "v2", body: "2"})), false)
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("import over an existing image = %v, want ErrExists naming --force", err)
	}
	if _, err := os.Stat(filepath.Join(images, "base", "v1")); err != nil {
		t.Fatalf("refused import changed the image: %v", err)
	}
	if _, err := Import(ctx, images, "base", bytes.NewReader(tarball(t, entry{name: "v2", body: "2"})), true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(images, "base", "v1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("forced import kept the old content: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(images, "base", "v2")); string(b) != "2" {
		t.Fatalf("forced import content = %q", b)
	}
	assertOnly(t, images, "base")
}

func TestImportBadNames(t *testing.T) {
	images := t.TempDir()
	data := tarball(t, entry{name: "f", body: "x"})
	for _, name := range []string{"", "Upper", ".hidden", "-dash", "a/b", "..", "../x", "a b", strings.Repeat("a", 64)} {
		if _, err := Import(context.Background(), images, name, bytes.NewReader(data), false); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Import(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"a", "debian-12.5_slim", strings.Repeat("a", 63)} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v", name, err)
		}
	}
	assertOnly(t, images)
}

func TestImportUnsafeEntries(t *testing.T) {
	cases := map[string][]entry{
		"dotdot":          {{name: "ok", body: "x"}, {name: "../evil", body: "x"}},
		"nested dotdot":   {{name: "a/../../evil", body: "x"}},
		"absolute":        {{name: "/evil", body: "x"}},
		"abs symlink dir": {{name: "out", typ: tar.TypeSymlink, link: "OUTSIDE"}, {name: "out/evil", body: "x"}},
		"rel symlink dir": {{name: "a/up", typ: tar.TypeSymlink, link: "../../../outside"}, {name: "a/up/evil", body: "x"}},
		"hardlink out":    {{name: "h", typ: tar.TypeLink, link: "../outside/secret"}},
		"symlink mkdir":   {{name: "out", typ: tar.TypeSymlink, link: "OUTSIDE"}, {name: "out/sub/", typ: tar.TypeDir}},
	}
	for name, entries := range cases {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			base := t.TempDir()
			images := filepath.Join(base, "images")
			outside := filepath.Join(base, "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
				t.Fatal(err)
			}
			for i := range entries {
				entries[i].link = strings.ReplaceAll(entries[i].link, "OUTSIDE", outside)
			}
			_, err := Import(context.Background(), images, "evil", bytes.NewReader(tarball(t, entries...)), false)
			if !errors.Is(err, ErrUnsafeEntry) {
				t.Fatalf("Import = %v, want ErrUnsafeEntry", err)
			}
			assertOnly(t, images)
			assertOnly(t, outside, "secret")
			if _, err := os.Stat(filepath.Join(base, "evil")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("an entry landed next to the images dir: %v", err)
			}
		})
	}
}

func TestImportBadStreams(t *testing.T) {
	images := t.TempDir()
	for name, data := range map[string][]byte{
		"empty":   nil,
		"garbage": bytes.Repeat([]byte("not a tarball "), 100),
		"xz":      append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 100)...),
		"gz-junk": {0x1f, 0x8b, 1, 2, 3},
	} {
		_, err := Import(context.Background(), images, "x", bytes.NewReader(data), false)
		if err == nil {
			t.Errorf("%s: imported", name)
		}
		if name == "xz" && !strings.Contains(err.Error(), "xz") {
			t.Errorf("xz error does not say so: %v", err)
		}
	}
	assertOnly(t, images)
}

func TestImportCancelled(t *testing.T) {
	images := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Import(ctx, images, "x", bytes.NewReader(tarball(t, entry{name: "f", body: "x"})), false); !errors.Is(err, context.Canceled) {
		t.Fatalf("Import = %v, want context.Canceled", err)
	}
	assertOnly(t, images)
}
