package skills

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/agentkernel/agentkernel/internal/safetar"
)

// Limits bound what one upload may hold. They are checked while reading,
// before anything is stored: an upload over any of them is refused whole.
type Limits struct {
	// UploadBytes bounds the upload as sent (the sum of its parts).
	UploadBytes int64
	// Files bounds the number of files in the skill.
	Files int
	// Bytes bounds the skill's files once unpacked.
	Bytes int64
	// Ratio bounds unpacked bytes per uploaded byte of an archive: a small
	// archive that unpacks to far more is a compression bomb.
	Ratio int64
}

// DefaultLimits are the limits when Config leaves them zero.
var DefaultLimits = Limits{UploadBytes: 32 << 20, Files: 1000, Bytes: 64 << 20, Ratio: 100}

func (l Limits) withDefaults() Limits {
	if l.UploadBytes <= 0 {
		l.UploadBytes = DefaultLimits.UploadBytes
	}
	if l.Files <= 0 {
		l.Files = DefaultLimits.Files
	}
	if l.Bytes <= 0 {
		l.Bytes = DefaultLimits.Bytes
	}
	if l.Ratio <= 0 {
		l.Ratio = DefaultLimits.Ratio
	}
	return l
}

// InputError is an upload refused for what it holds; the API answers it
// with Status (400, or 413 for a limit) and the message, which names the
// field or the limit.
type InputError struct {
	Status int
	Msg    string
}

func (e *InputError) Error() string { return e.Msg }

func badInput(format string, args ...any) error {
	return &InputError{Status: 400, Msg: fmt.Sprintf(format, args...)}
}

func overLimit(format string, args ...any) error {
	return &InputError{Status: 413, Msg: fmt.Sprintf(format, args...)}
}

// Part is one uploaded part of the "files" field: Name is its filename as
// sent (a path relative to the skill's parent directory, such as
// "pdf/SKILL.md"), Data its bytes.
type Part struct {
	Name string
	Data []byte
}

// File is one file of a skill, Path relative to the skill's directory.
type File struct {
	Path string
	Mode fs.FileMode
	Data []byte
}

// Bundle is a validated skill: its files (sorted by path, SKILL.md among
// them) and what its SKILL.md front matter says.
type Bundle struct {
	// Dir is the top-level directory the upload wrapped the files in, or
	// the skill's name when it had none.
	Dir         string
	Name        string
	Description string
	Files       []File
}

// Read validates an upload: either one part that is a zip or a (gzip- or
// zstd-compressed) tar of the skill directory, or one part per file.
// Every path must stay inside the skill (no absolute paths, no ".."), no
// link may be in it, the limits hold, and SKILL.md with a valid front
// matter must sit at the root of the one top-level directory.
func Read(parts []Part, lim Limits) (*Bundle, error) {
	lim = lim.withDefaults()
	if len(parts) == 0 {
		return nil, badInput(`field "files" is required: upload the skill's files (one part each, named like "my-skill/SKILL.md") or one zip or tar of its directory`)
	}
	var sent int64
	for _, p := range parts {
		sent += int64(len(p.Data))
	}
	if sent > lim.UploadBytes {
		return nil, overLimit("the upload is %d bytes, over the limit of %d (skills.max_upload_bytes)", sent, lim.UploadBytes)
	}
	var (
		files []File
		err   error
	)
	if len(parts) == 1 && archiveKind(parts[0]) != "" {
		files, err = readArchive(parts[0], lim)
	} else {
		files, err = readParts(parts, lim)
	}
	if err != nil {
		return nil, err
	}
	return bundle(files)
}

// archiveKind tells whether a lone part is an archive, by its bytes (zip,
// gzip, zstd, ustar magic) or, for a malformed one, by its name.
func archiveKind(p Part) string {
	d := p.Data
	switch {
	case bytes.HasPrefix(d, []byte("PK\x03\x04")), bytes.HasPrefix(d, []byte("PK\x05\x06")):
		return "zip"
	case bytes.HasPrefix(d, []byte{0x1f, 0x8b}), bytes.HasPrefix(d, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "tar"
	case len(d) >= 262 && string(d[257:262]) == "ustar":
		return "tar"
	}
	n := strings.ToLower(p.Name)
	switch {
	case strings.HasSuffix(n, ".zip"):
		return "zip"
	case strings.HasSuffix(n, ".tar"), strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"), strings.HasSuffix(n, ".tar.zst"):
		return "tar"
	}
	return ""
}

// cleanPath checks one member's path and returns it cleaned (slash
// separated, no "." segments); what names the member in errors.
func cleanPath(what, name string) (string, error) {
	if name == "" {
		return "", badInput("%s has no name: every file needs its path in the skill (such as \"my-skill/SKILL.md\")", what)
	}
	if strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", badInput("%s %q: paths use \"/\" and hold no NUL or \"\\\"", what, name)
	}
	if strings.HasPrefix(name, "/") {
		return "", badInput("%s %q is an absolute path; paths are relative to the skill's directory", what, name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", badInput("%s %q contains \"..\"; paths must stay inside the skill's directory", what, name)
		}
	}
	c := path.Clean(name)
	if c == "." {
		return "", badInput("%s %q names no file", what, name)
	}
	return c, nil
}

// counter enforces the file, unpacked-size and expansion-ratio limits
// while reading.
type counter struct {
	lim Limits
	// ratioCap is Ratio times the archive's size (0 for plain parts).
	ratioCap int64
	archive  int64
	files    int
	bytes    int64
}

// room is how many more bytes may be read before a limit is passed.
func (c *counter) room() int64 {
	max := c.lim.Bytes
	if c.ratioCap > 0 && c.ratioCap < max {
		max = c.ratioCap
	}
	return max - c.bytes
}

func (c *counter) add(what string, n int64) error {
	c.files++
	c.bytes += n
	if c.files > c.lim.Files {
		return overLimit("the skill has more than %d files (skills.max_files)", c.lim.Files)
	}
	if c.bytes > c.lim.Bytes {
		return overLimit("the skill's files add up to more than %d bytes unpacked (skills.max_unpacked_bytes), passed at %s", c.lim.Bytes, what)
	}
	if c.ratioCap > 0 && c.bytes > c.ratioCap {
		return overLimit("the archive of %d bytes unpacks to more than %d times its size (skills.max_expansion_ratio), passed at %s: refused as a compression bomb", c.archive, c.lim.Ratio, what)
	}
	return nil
}

func readParts(parts []Part, lim Limits) ([]File, error) {
	c := &counter{lim: lim}
	out := make([]File, 0, len(parts))
	for i, p := range parts {
		name, err := cleanPath(fmt.Sprintf("files[%d]", i), p.Name)
		if err != nil {
			return nil, err
		}
		if err := c.add(name, int64(len(p.Data))); err != nil {
			return nil, err
		}
		out = append(out, File{Path: name, Mode: 0o644, Data: p.Data})
	}
	return out, nil
}

// readArchive unpacks a zip or tar in memory under the limits. Reads are
// bounded by the room the limits leave, so a member that lies about its
// size cannot get past them.
func readArchive(p Part, lim Limits) ([]File, error) {
	c := &counter{lim: lim, archive: int64(len(p.Data)), ratioCap: int64(len(p.Data)) * lim.Ratio}
	if archiveKind(p) == "zip" {
		return readZip(p.Data, c)
	}
	return readTar(p.Data, c)
}

func readAll(what string, r io.Reader, c *counter) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, c.room()+1))
	if err != nil {
		return nil, badInput("the archive is malformed at %s: %v", what, err)
	}
	if err := c.add(what, int64(len(data))); err != nil {
		return nil, err
	}
	return data, nil
}

func readZip(data []byte, c *counter) ([]File, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, badInput("the uploaded zip cannot be read: %v", err)
	}
	var out []File
	for _, zf := range zr.File {
		what := fmt.Sprintf("archive member %q", zf.Name)
		mode := zf.Mode()
		if mode.IsDir() {
			continue // nothing is made of a directory entry: files name their own
		}
		name, err := cleanPath("archive member", zf.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case mode&fs.ModeSymlink != 0:
			return nil, badInput("%s is a symbolic link; links are not allowed in a skill", what)
		case !mode.IsRegular():
			return nil, badInput("%s is not a regular file or directory", what)
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, badInput("%s cannot be read: %v", what, err)
		}
		b, err := readAll(what, rc, c)
		rc.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: name, Mode: fileMode(mode), Data: b})
	}
	return out, nil
}

func readTar(data []byte, c *counter) ([]File, error) {
	tr, done, err := safetar.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, badInput("the uploaded tar cannot be read: %v", err)
	}
	defer done()
	var out []File
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			var ie *InputError
			if errors.As(err, &ie) {
				return nil, err
			}
			return nil, badInput("the uploaded tar is malformed: %v", err)
		}
		what := fmt.Sprintf("archive member %q", hdr.Name)
		if hdr.Typeflag == tar.TypeDir || hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // nothing is made of a directory entry: files name their own
		}
		name, err := cleanPath("archive member", hdr.Name)
		if err != nil {
			return nil, err
		}
		switch hdr.Typeflag {
		case tar.TypeSymlink, tar.TypeLink:
			return nil, badInput("%s is a link to %q; links are not allowed in a skill", what, hdr.Linkname)
		case tar.TypeReg, tar.TypeRegA:
		default:
			return nil, badInput("%s is not a regular file or directory (tar type %q)", what, hdr.Typeflag)
		}
		b, err := readAll(what, tr, c)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: name, Mode: fileMode(hdr.FileInfo().Mode()), Data: b})
	}
}

// fileMode keeps only whether a file is executable.
func fileMode(m fs.FileMode) fs.FileMode {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// bundle finds the skill's root (the one top-level directory, or the
// upload's root when SKILL.md sits there), strips it from the paths, and
// reads SKILL.md.
func bundle(files []File) (*Bundle, error) {
	if len(files) == 0 {
		return nil, badInput("the upload holds no files; a skill needs at least SKILL.md")
	}
	top := ""
	if !slices.ContainsFunc(files, func(f File) bool { return f.Path == "SKILL.md" }) {
		for _, f := range files {
			first, _, ok := strings.Cut(f.Path, "/")
			if !ok || (top != "" && first != top) {
				return nil, badInput("file %q: all files must be in one top-level directory with SKILL.md at its root (such as \"my-skill/SKILL.md\")", f.Path)
			}
			top = first
		}
	}
	seen := map[string]bool{}
	out := make([]File, 0, len(files))
	for _, f := range files {
		p := f.Path
		if top != "" {
			p = strings.TrimPrefix(p, top+"/")
		}
		if seen[p] {
			return nil, badInput("file %q appears twice in the upload", f.Path)
		}
		seen[p] = true
		f.Path = p
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	var md *File
	for i := range out {
		if out[i].Path == "SKILL.md" {
			md = &out[i]
		}
	}
	if md == nil {
		where := "the upload's root"
		if top != "" {
			where = fmt.Sprintf("%q", top+"/SKILL.md")
		}
		return nil, badInput("SKILL.md is missing: a skill needs SKILL.md at %s", where)
	}
	name, desc, err := frontMatter(md.Data)
	if err != nil {
		return nil, err
	}
	dir := top
	if dir == "" {
		dir = name
	}
	return &Bundle{Dir: dir, Name: name, Description: desc, Files: out}, nil
}
