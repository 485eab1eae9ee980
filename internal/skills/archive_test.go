package skills

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

const goodMD = "---\nname: pdf-tools\ndescription: Fills PDF forms. Use when the user mentions PDFs.\n---\n# PDF\nRun scripts/fill.py.\n"

type member struct {
	name, body, link string
	typ              byte // tar type; 0 = regular
}

func zipOf(t *testing.T, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range ms {
		h := &zip.FileHeader{Name: m.name, Method: zip.Deflate}
		body := m.body
		switch {
		case m.typ == tar.TypeSymlink:
			h.SetMode(0o777 | fs.ModeSymlink)
			body = m.link
		case strings.HasSuffix(m.name, "/"):
			h.SetMode(0o755 | fs.ModeDir)
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	zw.Close()
	return buf.Bytes()
}

func tarOf(t *testing.T, gz bool, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w = &buf
	var zw *gzip.Writer
	tw := tar.NewWriter(w)
	if gz {
		zw = gzip.NewWriter(w)
		tw = tar.NewWriter(zw)
	}
	for _, m := range ms {
		typ := m.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: m.name, Typeflag: typ, Mode: 0o644, Size: int64(len(m.body)), Linkname: m.link}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(m.body))
		}
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

func TestReadAcceptsTheShapesTheSDKSends(t *testing.T) {
	for name, parts := range map[string][]Part{
		"flat, a script first": {{Name: "scripts/fill.py", Data: []byte("print(1)")}, {Name: "SKILL.md", Data: []byte(goodMD)}},
		"one part per file":    {{Name: "pdf-tools/SKILL.md", Data: []byte(goodMD)}, {Name: "pdf-tools/scripts/fill.py", Data: []byte("print(1)")}},
		"zip":                  {{Name: "skill.zip", Data: zipOf(t, member{name: "pdf-tools/SKILL.md", body: goodMD}, member{name: "pdf-tools/scripts/fill.py", body: "print(1)"})}},
		"tar.gz":               {{Name: "skill.tgz", Data: tarOf(t, true, member{name: "pdf-tools/", typ: tar.TypeDir}, member{name: "pdf-tools/SKILL.md", body: goodMD}, member{name: "pdf-tools/scripts/fill.py", body: "print(1)"})}},
		"flat tar":             {{Name: "x", Data: tarOf(t, false, member{name: "./", typ: tar.TypeDir}, member{name: "scripts/fill.py", body: "print(1)"}, member{name: "./SKILL.md", body: goodMD})}},
		"flat zip, root dir":   {{Name: "x", Data: zipOf(t, member{name: "./"}, member{name: "scripts/fill.py", body: "print(1)"}, member{name: "SKILL.md", body: goodMD})}},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := Read(parts, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if b.Name != "pdf-tools" || !strings.HasPrefix(b.Description, "Fills PDF forms") || len(b.Files) != 2 ||
				b.Files[0].Path != "SKILL.md" || b.Files[1].Path != "scripts/fill.py" || string(b.Files[1].Data) != "print(1)" {
				t.Fatalf("bundle = %+v", b)
			}
		})
	}
}

func TestReadRefusesNamingWhy(t *testing.T) {
	md := member{name: "s/SKILL.md", body: goodMD}
	bomb := strings.Repeat("a", 5<<20)
	cases := []struct {
		name   string
		parts  []Part
		lim    Limits
		status int
		want   string
	}{
		{"no files", nil, Limits{}, 400, `"files" is required`},
		{"absolute path in zip", []Part{{Data: zipOf(t, md, member{name: "/etc/passwd", body: "x"})}}, Limits{}, 400, "absolute path"},
		{"dot-dot in tar", []Part{{Data: tarOf(t, false, md, member{name: "s/../../evil", body: "x"})}}, Limits{}, 400, `".."`},
		{"dot-dot in a part", []Part{{Name: "s/SKILL.md", Data: []byte(goodMD)}, {Name: "../x", Data: []byte("x")}}, Limits{}, 400, `".."`},
		{"symlink out in tar", []Part{{Data: tarOf(t, false, md, member{name: "s/passwd", typ: tar.TypeSymlink, link: "/etc/passwd"})}}, Limits{}, 400, "link"},
		{"hardlink in tar", []Part{{Data: tarOf(t, false, md, member{name: "s/h", typ: tar.TypeLink, link: "../../etc/shadow"})}}, Limits{}, 400, "link"},
		{"symlink in zip", []Part{{Data: zipOf(t, md, member{name: "s/l", typ: tar.TypeSymlink, link: "/etc"})}}, Limits{}, 400, "symbolic link"},
		{"too many files", []Part{{Data: zipOf(t, md, member{name: "s/a", body: "1"}, member{name: "s/b", body: "2"})}}, Limits{Files: 2}, 413, "skills.max_files"},
		{"too big unpacked", []Part{{Data: zipOf(t, md, member{name: "s/a", body: strings.Repeat("x", 2000)})}}, Limits{Bytes: 1000, Ratio: 1 << 20}, 413, "skills.max_unpacked_bytes"},
		{"compression bomb", []Part{{Data: tarOf(t, true, md, member{name: "s/zeros", body: bomb})}}, Limits{}, 413, "skills.max_expansion_ratio"},
		{"upload too big", []Part{{Name: "s/SKILL.md", Data: []byte(goodMD)}}, Limits{UploadBytes: 10}, 413, "skills.max_upload_bytes"},
		{"no SKILL.md", []Part{{Name: "s/README.md", Data: []byte("hi")}}, Limits{}, 400, "SKILL.md is missing"},
		{"two top dirs", []Part{{Name: "a/SKILL.md", Data: []byte(goodMD)}, {Name: "b/x", Data: []byte("x")}}, Limits{}, 400, "one top-level directory"},
		{"no front matter", []Part{{Name: "s/SKILL.md", Data: []byte("# hi")}}, Limits{}, 400, "front matter"},
		{"no name", []Part{{Name: "s/SKILL.md", Data: []byte("---\ndescription: d\n---\n")}}, Limits{}, 400, `"name" is required`},
		{"bad name", []Part{{Name: "s/SKILL.md", Data: []byte("---\nname: ../etc\ndescription: d\n---\n")}}, Limits{}, 400, `"name" "../etc"`},
		{"no description", []Part{{Name: "s/SKILL.md", Data: []byte("---\nname: ok\n---\n")}}, Limits{}, 400, `"description" is required`},
		{"corrupt zip", []Part{{Name: "s.zip", Data: []byte("PK\x03\x04garbage")}}, Limits{}, 400, "zip cannot be read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(c.parts, c.lim)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Status != c.status || !strings.Contains(ie.Msg, c.want) {
				t.Fatalf("Read = %v, want a %d naming %q", err, c.status, c.want)
			}
		})
	}
}
