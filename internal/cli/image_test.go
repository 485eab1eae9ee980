package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/image"
)

func imageTarball(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := "ID=cli-test\n"
	if err := tw.WriteHeader(&tar.Header{Name: "etc/os-release", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runImageCmd(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Environ: env}
	_, err := m.dispatch(context.Background(), []string{"agentkernel", "image"}, imageCommand(), args)
	return out.String(), errb.String(), err
}

func TestImageCommands(t *testing.T) {
	home := t.TempDir()
	env := []string{"AGENTKERNEL_HOME=" + home, "HOME=/nonexistent"}
	tarPath := imageTarball(t)

	// Flags may follow the positionals.
	out, _, err := runImageCmd(t, env, "import", "base", tarPath, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var info image.Info
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Name != "base" || info.Files != 1 || info.Path != filepath.Join(home, "images", "base") {
		t.Fatalf("import --json = %q (%+v, %v)", out, info, err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "images", "base", "etc", "os-release")); err != nil || string(b) != "ID=cli-test\n" {
		t.Fatalf("imported file = %q, %v", b, err)
	}
	if _, _, err := runImageCmd(t, env, "import", "base", tarPath); !errors.Is(err, image.ErrExists) {
		t.Fatalf("second import = %v, want ErrExists", err)
	}
	if out, _, err := runImageCmd(t, env, "import", "--force", "base", tarPath); err != nil || !strings.Contains(out, "imported image base") {
		t.Fatalf("import --force = %q, %v", out, err)
	}
	if out, _, err := runImageCmd(t, env, "ls"); err != nil || !strings.Contains(out, "NAME") || !strings.Contains(out, "base") {
		t.Fatalf("ls = %q, %v", out, err)
	}
	if _, _, err := runImageCmd(t, env, "import", "Bad/Name", tarPath); !errors.Is(err, errUsage) {
		t.Fatalf("bad name = %v, want a usage error", err)
	}
	if _, _, err := runImageCmd(t, env, "import", "only-name"); !errors.Is(err, errUsage) {
		t.Fatalf("missing tarball = %v, want a usage error", err)
	}
	if _, _, err := runImageCmd(t, env, "rm", "base"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runImageCmd(t, env, "rm", "base"); !errors.Is(err, image.ErrNotFound) {
		t.Fatalf("rm missing = %v, want ErrNotFound", err)
	}
	if out, _, err := runImageCmd(t, env, "ls", "--json"); err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("ls --json after rm = %q, %v", out, err)
	}
}

func TestImagesDirDefaults(t *testing.T) {
	m := &Main{Environ: []string{"HOME=/home/u"}}
	for _, c := range []struct {
		f    imageFlags
		env  []string
		want string
	}{
		{imageFlags{dir: "/x/images"}, nil, "/x/images"},
		{imageFlags{home: "/h"}, []string{"AGENTKERNEL_HOME=/e"}, "/h/images"},
		{imageFlags{}, []string{"AGENTKERNEL_HOME=/e"}, "/e/images"},
		{imageFlags{}, nil, "/home/u/.local/share/agentkernel/images"},
	} {
		m.Environ = append([]string{"HOME=/home/u"}, c.env...)
		if got, err := c.f.imagesDir(m); err != nil || got != c.want {
			t.Errorf("imagesDir(%+v, %v) = %q, %v; want %q", c.f, c.env, got, err, c.want)
		}
	}
}
