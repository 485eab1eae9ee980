package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	buildsMu sync.Mutex
	builds   = map[string]*staticBuild{}
)

type staticBuild struct {
	once sync.Once
	path string
	err  error
}

// StaticBinary builds a Go package (CGO_ENABLED=0, so it runs inside a
// sandbox too) once per test process, with the build tags given, and
// returns its path: a file named after the package, alone in a directory
// of its own that the test binary removes when it ends (Main).
func StaticBinary(t testing.TB, pkg string, tags ...string) string {
	t.Helper()
	key := pkg + " " + strings.Join(tags, ",")
	buildsMu.Lock()
	b := builds[key]
	if b == nil {
		b = &staticBuild{}
		builds[key] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		dir, err := ProcessTempDir("akbuild")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, path.Base(pkg))
		args := []string{"build", "-o", b.path}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
