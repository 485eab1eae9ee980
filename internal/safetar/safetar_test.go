package safetar

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The one test suite of the one extractor: every hostile archive against
// every caller's rules (Rootfs for images, Workspace for backups, Bundle for
// object apps), then what each set of rules accepts differently.

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	size             int64 // for sparse/oversized headers; default len(body)
}

func reg(name, body string) entry { return entry{name: name, body: body} }

func archive(t testing.TB, entries ...entry) []byte {
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
		if typ == tar.TypeXGlobalHeader {
			hdr = &tar.Header{Typeflag: typ, PAXRecords: map[string]string{"comment": "global"}, Format: tar.FormatPAX}
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

var profiles = map[string]func() Options{
	"rootfs":    Rootfs,
	"workspace": Workspace,
	"bundle":    func() Options { return Bundle(1<<20, 100) },
}

// extractInto extracts data into base/target and returns the error.
func extractInto(t *testing.T, data []byte, o Options) (string, Stats, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "target")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tr, done, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return dir, Stats{}, err
	}
	defer done()
	st, err := Extract(context.Background(), tr, dir, o)
	return dir, st, err
}

func TestHostileArchivesAreRefusedByEveryProfile(t *testing.T) {
	cases := map[string][]entry{
		"dotdot":             {reg("ok", "x"), reg("../escape", "x")},
		"nested dotdot":      {reg("a/../../escape", "x")},
		"absolute":           {reg("OUTSIDE/abs", "x")},
		"abs symlink file":   {{name: "ln", typ: tar.TypeSymlink, link: "OUTSIDE"}, reg("ln/escape", "x")},
		"rel symlink file":   {{name: "a/up", typ: tar.TypeSymlink, link: "../../outside"}, reg("a/up/escape", "x")},
		"symlink mkdir":      {{name: "out", typ: tar.TypeSymlink, link: "OUTSIDE"}, {name: "out/sub/", typ: tar.TypeDir}},
		"hardlink out":       {{name: "h", typ: tar.TypeLink, link: "../outside/secret"}},
		"hardlink abs":       {{name: "h", typ: tar.TypeLink, link: "OUTSIDE/secret"}},
		"hardlink via link":  {{name: "ln", typ: tar.TypeSymlink, link: "OUTSIDE"}, {name: "h", typ: tar.TypeLink, link: "ln/secret"}},
		"symlink over dir":   {{name: "d/", typ: tar.TypeDir}, {name: "d", typ: tar.TypeSymlink, link: "OUTSIDE"}, reg("d/escape", "x")},
		"empty name":         {reg("", "x")},
		"unsupported type 7": {{name: "c", typ: tar.TypeCont}},
	}
	for pname, profile := range profiles {
		for name, entries := range cases {
			t.Run(pname+"/"+strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
				base := t.TempDir()
				outside := filepath.Join(base, "outside")
				if err := os.MkdirAll(outside, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
					t.Fatal(err)
				}
				es := append([]entry(nil), entries...)
				for i := range es {
					es[i].name = strings.ReplaceAll(es[i].name, "OUTSIDE", outside)
					es[i].link = strings.ReplaceAll(es[i].link, "OUTSIDE", outside)
				}
				data := archive(t, es...)
				dir := filepath.Join(base, "target")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				_, err := Extract(context.Background(), tar.NewReader(bytes.NewReader(data)), dir, profile())
				if !errors.Is(err, ErrUnsafeEntry) {
					t.Fatalf("Extract = %v, want ErrUnsafeEntry", err)
				}
				assertDir(t, outside, "secret")
				assertDir(t, base, "outside", "target")
				if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s" {
					t.Fatalf("secret changed: %q", b)
				}
			})
		}
	}
}

// assertDir checks that dir holds exactly names.
func assertDir(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

// What each set of rules accepts: "ok" extracts, "refused" is an
// ErrUnsafeEntry.
func TestProfilesDiffer(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		want    map[string]string // profile → "ok" or "refused"
	}{
		{"char device", []entry{reg("f", "x"), {name: "null", typ: tar.TypeChar}},
			map[string]string{"rootfs": "ok", "workspace": "refused", "bundle": "refused"}},
		{"fifo", []entry{reg("f", "x"), {name: "fifo", typ: tar.TypeFifo}},
			map[string]string{"rootfs": "ok", "workspace": "refused", "bundle": "refused"}},
		{"absolute symlink", []entry{{name: "passwd", typ: tar.TypeSymlink, link: "/etc/passwd"}},
			map[string]string{"rootfs": "ok", "workspace": "ok", "bundle": "refused"}},
		{"climbing symlink", []entry{{name: "a/up", typ: tar.TypeSymlink, link: "../../x"}},
			map[string]string{"rootfs": "ok", "workspace": "ok", "bundle": "refused"}},
		{"symlink chain climbing out", []entry{
			{name: "d/", typ: tar.TypeDir}, {name: "d/up", typ: tar.TypeSymlink, link: ".."},
			{name: "e", typ: tar.TypeSymlink, link: "d/up/.."}},
			map[string]string{"rootfs": "ok", "workspace": "ok", "bundle": "refused"}},
		{"symlink chain climbing out of a directory", []entry{
			{name: "d/", typ: tar.TypeDir}, {name: "d/up", typ: tar.TypeSymlink, link: ".."},
			{name: "d/x", typ: tar.TypeSymlink, link: "up/.."}},
			map[string]string{"rootfs": "ok", "workspace": "ok", "bundle": "refused"}},
		{"symlink inside", []entry{{name: "lib/", typ: tar.TypeDir}, reg("lib/a.js", "x"), {name: "bin/a", typ: tar.TypeSymlink, link: "../lib/a.js"}},
			map[string]string{"rootfs": "ok", "workspace": "ok", "bundle": "ok"}},
		{"hard link inside", []entry{reg("tool", "x"), {name: "alias", typ: tar.TypeLink, link: "tool"}},
			map[string]string{"rootfs": "ok", "workspace": "refused", "bundle": "ok"}},
		{"hard link to a missing file", []entry{{name: "alias", typ: tar.TypeLink, link: "nothing"}},
			map[string]string{"rootfs": "refused", "workspace": "refused", "bundle": "refused"}},
		{"repeated file", []entry{reg("f", "1"), reg("f", "2")},
			map[string]string{"rootfs": "ok", "workspace": "refused", "bundle": "refused"}},
		{"file over a directory with entries", []entry{{name: "d/", typ: tar.TypeDir}, reg("d/x", "1"), reg("d", "2")},
			map[string]string{"rootfs": "refused", "workspace": "refused", "bundle": "refused"}},
		{"repeated directory", []entry{{name: "d/", typ: tar.TypeDir}, {name: "d/", typ: tar.TypeDir}, reg("d/f", "x")},
			map[string]string{"rootfs": "ok", "workspace": "ok", "bundle": "ok"}},
		{"root entry", []entry{{name: "./", typ: tar.TypeDir}, reg("./f", "x")},
			map[string]string{"rootfs": "ok", "workspace": "refused", "bundle": "ok"}},
		{"backslash", []entry{reg(`dev-disk-by\x2duuid.device`, "x")},
			map[string]string{"rootfs": "ok", "workspace": "ok", "bundle": "ok"}},
		{"global header", []entry{{name: "pax_global_header", typ: tar.TypeXGlobalHeader}, reg("f", "x")},
			map[string]string{"rootfs": "ok", "workspace": "ok", "bundle": "ok"}},
	}
	for _, tc := range cases {
		for pname, profile := range profiles {
			t.Run(strings.ReplaceAll(tc.name, " ", "_")+"/"+pname, func(t *testing.T) {
				_, _, err := extractInto(t, archive(t, tc.entries...), profile())
				switch tc.want[pname] {
				case "ok":
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
				case "refused":
					if !errors.Is(err, ErrUnsafeEntry) {
						t.Fatalf("Extract = %v, want ErrUnsafeEntry", err)
					}
				default:
					t.Fatal("no expectation")
				}
			})
		}
	}
}

func TestModes(t *testing.T) {
	data := archive(t,
		entry{name: "bin/", typ: tar.TypeDir, mode: 0o700},
		entry{name: "bin/tool", body: "#!/bin/sh\n", mode: 0o4750},
		entry{name: "secret", body: "s", mode: 0o600},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
	)
	want := map[string]map[string]fs.FileMode{
		"rootfs":    {"bin": fs.ModeDir | 0o700, "bin/tool": 0o750, "secret": 0o600, "tmp": fs.ModeDir | fs.ModeSticky | 0o777},
		"workspace": {"bin": fs.ModeDir | 0o700, "bin/tool": fs.ModeSetuid | 0o750, "secret": 0o600, "tmp": fs.ModeDir | fs.ModeSticky | 0o777},
		"bundle":    {"bin": fs.ModeDir | 0o755, "bin/tool": 0o755, "secret": 0o644, "tmp": fs.ModeDir | 0o755},
	}
	for pname, profile := range profiles {
		dir, _, err := extractInto(t, data, profile())
		if err != nil {
			t.Fatalf("%s: %v", pname, err)
		}
		for p, m := range want[pname] {
			fi, err := os.Lstat(filepath.Join(dir, p))
			if err != nil || fi.Mode() != m {
				t.Errorf("%s: %s mode %v (%v), want %v", pname, p, fi.Mode(), err, m)
			}
		}
	}
}

func TestStatsAndRootfsSkips(t *testing.T) {
	data := archive(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "./bin/", typ: tar.TypeDir},
		reg("./bin/tool", "12345"),
		entry{name: "./bin/alias", typ: tar.TypeLink, link: "./bin/tool"},
		entry{name: "./sbin", typ: tar.TypeSymlink, link: "bin"},
		entry{name: "./dev/null", typ: tar.TypeChar},
	)
	dir, st, err := extractInto(t, data, Rootfs())
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stats{Files: 2, Dirs: 1, Symlinks: 1, Bytes: 5, Skipped: 1}) {
		t.Fatalf("stats %+v", st)
	}
	a, _ := os.Stat(filepath.Join(dir, "bin", "tool"))
	b, _ := os.Stat(filepath.Join(dir, "bin", "alias"))
	if !os.SameFile(a, b) {
		t.Fatal("hard link not preserved")
	}
	if _, err := os.Lstat(filepath.Join(dir, "dev", "null")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("device node created: %v", err)
	}
	// Check counts the same without writing.
	cst, err := Check(context.Background(), tar.NewReader(bytes.NewReader(data)), Rootfs())
	if err != nil || cst != st {
		t.Fatalf("Check = %+v, %v; want %+v", cst, err, st)
	}
}

func TestCheckAppliesTheRules(t *testing.T) {
	for _, es := range [][]entry{
		{reg("../x", "x")},
		{reg("/x", "x")},
		{{name: "dev", typ: tar.TypeChar}},
		{{name: "h", typ: tar.TypeLink, link: "f"}},
	} {
		if _, err := Check(context.Background(), tar.NewReader(bytes.NewReader(archive(t, es...))), Workspace()); !errors.Is(err, ErrUnsafeEntry) {
			t.Errorf("Check(%+v) = %v, want ErrUnsafeEntry", es, err)
		}
	}
}

func TestLimits(t *testing.T) {
	o := Bundle(10, 3)
	dir, _, err := extractInto(t, archive(t, reg("a", "12345"), reg("b", "123456")), o)
	var le *LimitError
	if !errors.As(err, &le) || le.Entries || le.Max != 10 || le.Got != 11 || !errors.Is(err, ErrLimit) {
		t.Fatalf("over MaxBytes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the file over the limit was written: %v", err)
	}
	_, _, err = extractInto(t, archive(t, reg("a", ""), reg("b", ""), reg("c", ""), reg("d", "")), o)
	if !errors.As(err, &le) || !le.Entries || le.Max != 3 {
		t.Fatalf("over MaxEntries: %v", err)
	}
	if !strings.Contains(err.Error(), "more than 3 entries") {
		t.Fatalf("message: %v", err)
	}
}

// A gzip bomb: 64 MiB of zeros in one file compresses to ~64 KiB. The
// limit stops it at the header, before anything is decompressed into the
// target.
func TestGzipBombStopsAtTheLimit(t *testing.T) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	const size = 64 << 20
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(tw, zeroReader{}, size); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(raw.Bytes())
	zw.Close()
	if gz.Len() > 1<<20 {
		t.Fatalf("bomb is %d bytes compressed", gz.Len())
	}
	dir, _, err := extractInto(t, gz.Bytes(), Bundle(1<<20, 100))
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("Extract = %v, want ErrLimit", err)
	}
	assertDir(t, dir)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestMalformedStreams(t *testing.T) {
	good := archive(t, reg("f", strings.Repeat("x", 4096)))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	for name, data := range map[string][]byte{
		"truncated tar":  good[:1000],
		"truncated gzip": gz.Bytes()[:gz.Len()/2],
		"gzip junk":      append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}, bytes.Repeat([]byte{0xff}, 100)...),
		"garbage":        bytes.Repeat([]byte("not a tarball "), 100),
		"xz":             append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 100)...),
	} {
		_, _, err := extractInto(t, data, Bundle(1<<20, 100))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if _, err := Extract(ctx, tar.NewReader(bytes.NewReader(archive(t, reg("f", "x")))), dir, Bundle(0, 0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Extract = %v, want context.Canceled", err)
	}
	assertDir(t, dir)
}
