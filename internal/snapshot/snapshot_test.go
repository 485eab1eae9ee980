package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// makeTree writes a random tree: nested dirs, empty dirs, symlinks (inside
// and pointing out), various modes, totalBytes of file content.
func makeTree(t testing.TB, dir string, seed uint64, totalBytes int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b9))
	dirs := []string{"."}
	for i := range 20 {
		parent := dirs[r.IntN(len(dirs))]
		d := filepath.Join(parent, fmt.Sprintf("d%02d", i))
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty", "nested-empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	modes := []fs.FileMode{0o644, 0o600, 0o755, 0o400, 0o640}
	written := 0
	for i := 0; written < totalBytes; i++ {
		size := r.IntN(4 << 20)
		if i%5 == 0 {
			size = r.IntN(100) // many small files too
		}
		if written+size > totalBytes {
			size = totalBytes - written
		}
		buf := make([]byte, size)
		for j := range buf { // compressible but not trivial
			buf[j] = byte(r.IntN(16)) + 'a'
		}
		p := filepath.Join(dir, dirs[r.IntN(len(dirs))], fmt.Sprintf("f%03d.dat", i))
		if err := os.WriteFile(p, buf, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, modes[i%len(modes)]); err != nil {
			t.Fatal(err)
		}
		written += size
	}
	for i, target := range []string{"d00", "../../outside", "/etc/passwd", "missing-target"} {
		if err := os.Symlink(target, filepath.Join(dir, fmt.Sprintf("link%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
}

// fingerprint describes a tree exactly: type, mode, content hash, link target.
func fingerprint(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %v %d", fi.Mode(), fi.ModTime().Unix())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %v %d %x", fi.Mode(), fi.ModTime().UnixNano(), sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffTrees(t *testing.T, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: want %q, got %q", k, v, got[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected entry", k)
		}
	}
}

func TestRoundTripTwiceByteForByte(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "workspace")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	makeTree(t, src, 1, 50<<20)
	want := fingerprint(t, src)

	ws := filepath.Join(t.TempDir(), "workspace")
	cur := src
	for round := range 2 { // hibernate → wake, twice in a row
		var buf bytes.Buffer
		wst, err := Write(ctx, cur, &buf, WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vst, err := Verify(ctx, bytes.NewReader(buf.Bytes()))
		if err != nil || vst != wst {
			t.Fatalf("round %d: verify %+v vs write %+v (%v)", round, vst, wst, err)
		}
		rst, err := Replace(ctx, bytes.NewReader(buf.Bytes()), ws)
		if err != nil {
			t.Fatal(err)
		}
		if rst != wst {
			t.Fatalf("round %d: restored %+v, wrote %+v", round, rst, wst)
		}
		diffTrees(t, want, fingerprint(t, ws))
		cur = ws
	}
}

func TestExcludeLeavesOutSubtree(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, ".agentkernel", "ops"), 0o700)
	os.WriteFile(filepath.Join(src, ".agentkernel", "ops", "x"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(src, "keep"), []byte("k"), 0o600)
	var buf bytes.Buffer
	st, err := Write(ctx, src, &buf, WriteOptions{Exclude: func(rel string) bool { return rel == ".agentkernel" }})
	if err != nil || st.Files != 1 || st.Dirs != 0 {
		t.Fatalf("%+v %v", st, err)
	}
}

// hostile builds a tar+zstd archive from raw headers.
func hostile(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestHostileArchivesAreRefusedAndNothingEscapes(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	reg := func(name string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Size: 3, Mode: 0o644}
	}
	cases := map[string][]*tar.Header{
		"absolute":         {reg(filepath.Join(outside, "abs"))},
		"dotdot":           {reg("../escape")},
		"nested dotdot":    {reg("a/../../escape")},
		"symlink escape":   {{Name: "ln", Typeflag: tar.TypeSymlink, Linkname: outside}, reg("ln/escape")},
		"symlink relative": {{Name: "ln", Typeflag: tar.TypeSymlink, Linkname: "../" + filepath.Base(outside)}, reg("ln/escape")},
		"char device":      {{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}},
		"fifo":             {{Name: "fifo", Typeflag: tar.TypeFifo, Mode: 0o644}},
		"hard link out":    {{Name: "hl", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			ws := filepath.Join(parent, "workspace")
			os.Mkdir(ws, 0o755)
			os.WriteFile(filepath.Join(ws, "precious"), []byte("keep me"), 0o644)
			_, err := Replace(ctx, bytes.NewReader(hostile(t, entries...)), ws)
			if err == nil {
				t.Fatal("hostile archive was accepted")
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "precious")); string(b) != "keep me" {
				t.Fatal("a refused restore changed the workspace")
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("something was written outside: %v", ents)
			}
			if _, err := os.Stat(filepath.Join(parent, "escape")); err == nil {
				t.Fatal("escaped through ..")
			}
			if name == "dotdot" || name == "absolute" || name == "char device" {
				if !errors.Is(err, ErrUnsafeEntry) {
					t.Fatalf("want ErrUnsafeEntry, got %v", err)
				}
			}
		})
	}
}

func TestCorruptArchiveKeepsWorkspace(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	makeTree(t, src, 7, 2<<20)
	var buf bytes.Buffer
	if _, err := Write(ctx, src, &buf, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for name, bad := range map[string][]byte{
		"truncated": b[:len(b)/2],
		"flipped":   flip(b, len(b)/3),
	} {
		ws := filepath.Join(t.TempDir(), "ws")
		os.Mkdir(ws, 0o755)
		os.WriteFile(filepath.Join(ws, "precious"), []byte("keep"), 0o644)
		if _, err := Verify(ctx, bytes.NewReader(bad)); err == nil {
			t.Fatalf("%s: Verify accepted a bad archive", name)
		}
		if _, err := Replace(ctx, bytes.NewReader(bad), ws); err == nil {
			t.Fatalf("%s: Replace accepted a bad archive", name)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, "precious")); string(got) != "keep" {
			t.Fatalf("%s: workspace changed", name)
		}
		ents, _ := os.ReadDir(filepath.Dir(ws))
		for _, e := range ents {
			if strings.Contains(e.Name(), "restore-") {
				t.Fatalf("%s: temp dir left behind: %s", name, e.Name())
			}
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

// The workspace belongs to a sandbox that may change it while it is
// archived. Directories it swaps for symlinks into the host between the
// listing and the read (here deterministically, from the Exclude hook,
// which runs exactly then) are never followed, nor are symlinked files.
func TestWriteFollowsNothingTheSandboxSwapsIn(t *testing.T) {
	ctx := context.Background()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "passwd"), []byte("HOST-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, swap := range []string{"dir", "file"} {
		t.Run(swap, func(t *testing.T) {
			ws := t.TempDir()
			os.Mkdir(filepath.Join(ws, "a"), 0o755)
			os.WriteFile(filepath.Join(ws, "a", "passwd"), []byte("mine"), 0o644)
			hook := func(rel string) bool {
				if rel != "a/passwd" {
					return false
				}
				switch swap {
				case "dir": // a/ → the host directory
					os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "a.old"))
					os.Symlink(host, filepath.Join(ws, "a"))
				case "file": // a/passwd → the host file
					os.Remove(filepath.Join(ws, "a", "passwd"))
					os.Symlink(filepath.Join(host, "passwd"), filepath.Join(ws, "a", "passwd"))
				}
				return false
			}
			var buf bytes.Buffer
			_, err := Write(ctx, ws, &buf, WriteOptions{Exclude: hook})
			if err == nil {
				out := t.TempDir()
				if _, err := Extract(ctx, bytes.NewReader(buf.Bytes()), out); err != nil {
					t.Fatal(err)
				}
				// A symlink is archived as a symlink (data, resolved inside
				// the sandbox); only a regular file could carry host data.
				p := filepath.Join(out, "a", "passwd")
				if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
					if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("HOST-SECRET")) {
						t.Fatalf("the snapshot holds a host file read through the sandbox's symlink")
					}
				}
			}
			if bytes.Contains(buf.Bytes(), []byte("HOST-SECRET")) {
				t.Fatal("the snapshot stream holds a host file")
			}
		})
	}
}

// A snapshot with a runtime part restores both directories; the workspace
// part is a complete archive by itself (what earlier versions read), and
// an archive without the runtime part leaves the runtime directory empty.
func TestRuntimePartRoundTrip(t *testing.T) {
	ctx := context.Background()
	ws, rt := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "user.txt"), []byte("mine"), 0o644)
	os.MkdirAll(filepath.Join(rt, "ops", "op_1"), 0o700)
	os.WriteFile(filepath.Join(rt, "ops", "op_1", "result.json"), []byte(`{"exit_code":0}`), 0o600)
	var buf bytes.Buffer
	st, err := Write(ctx, ws, &buf, WriteOptions{Runtime: rt})
	if err != nil || st.Files != 2 || st.Dirs != 2 {
		t.Fatalf("write: %+v %v", st, err)
	}
	if got, err := Verify(ctx, bytes.NewReader(buf.Bytes())); err != nil || got != st {
		t.Fatalf("verify: %+v %v, want %+v", got, err, st)
	}
	// One tar reader (an earlier version's restore) sees the workspace only.
	zr, _ := zstd.NewReader(bytes.NewReader(buf.Bytes()))
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	zr.Close()
	if strings.Join(names, ",") != "user.txt" {
		t.Fatalf("first part holds %v, want the workspace only", names)
	}

	ws2, rt2 := filepath.Join(t.TempDir(), "ws"), filepath.Join(t.TempDir(), "rt")
	os.Mkdir(ws2, 0o755)
	os.Mkdir(rt2, 0o755)
	os.WriteFile(filepath.Join(rt2, "stale"), nil, 0o600)
	if _, err := Replace(ctx, bytes.NewReader(buf.Bytes()), ws2, rt2); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws2, "user.txt")); string(b) != "mine" {
		t.Fatalf("workspace: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(rt2, "ops", "op_1", "result.json")); string(b) != `{"exit_code":0}` {
		t.Fatalf("runtime: %q", b)
	}
	if _, err := os.Stat(filepath.Join(rt2, "stale")); err == nil {
		t.Fatal("the runtime dir kept a file the snapshot did not have")
	}
	// An archive of the workspace alone empties the runtime directory.
	buf.Reset()
	if _, err := Write(ctx, ws, &buf, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Replace(ctx, bytes.NewReader(buf.Bytes()), ws2, rt2); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(rt2); len(entries) != 0 {
		t.Fatalf("runtime dir after a workspace-only restore: %v", entries)
	}
}
