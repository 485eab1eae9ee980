package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/testenv"
	"github.com/agentkernel/agentkernel/objectserver"
	"github.com/agentkernel/agentkernel/objectserver/objectservertest"
)

var updateTemplates = flag.Bool("update", false, "rewrite objinit_templates/ from objectserver/ and sdk/")

// objInitSources maps each template (under objinit_templates/) to its
// canonical source (relative to the repository root) and the edit that
// makes the source work from the scaffold's flat layout.
func objInitSources(t *testing.T) map[string]func() []byte {
	t.Helper()
	read := func(p string, edit func([]byte) []byte) func() []byte {
		return func() []byte {
			b, err := os.ReadFile(filepath.Join("..", "..", p))
			if err != nil {
				t.Fatal(err)
			}
			if edit != nil {
				b = edit(b)
			}
			return b
		}
	}
	m := map[string]func() []byte{
		"go/main.go.tmpl":              read("objectserver/examples/counter/main.go", nil),
		"python/agentkernel_object.py": read("sdk/python/agentkernel_object.py", nil),
		"python/counter.py":            read("sdk/python/examples/counter.py", nil),
		"node/agentkernel-object.js":   read("sdk/node/agentkernel-object.js", nil),
		"node/counter.js": read("sdk/node/examples/counter.js", func(b []byte) []byte {
			// In sdk/ the example sits in examples/, below the helper; in a
			// scaffold they are side by side.
			return bytes.ReplaceAll(b, []byte(`require("../agentkernel-object")`), []byte(`require("./agentkernel-object")`))
		}),
	}
	srcs, err := filepath.Glob(filepath.Join("..", "..", "objectserver", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srcs {
		if name := filepath.Base(s); !strings.HasSuffix(name, "_test.go") {
			m["go/objectserver/"+name+".tmpl"] = read("objectserver/"+name, nil)
		}
	}
	return m
}

func TestObjInitTemplatesMatchSources(t *testing.T) {
	want := objInitSources(t)
	var have []string
	err := filepath.WalkDir("objinit_templates", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != filepath.Join("objinit_templates", "README.md.tmpl") {
			have = append(have, filepath.ToSlash(strings.TrimPrefix(p, "objinit_templates"+string(filepath.Separator))))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if *updateTemplates {
		for _, p := range have {
			if want[p] == nil {
				if err := os.Remove(filepath.Join("objinit_templates", p)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for p, src := range want {
			dst := filepath.Join("objinit_templates", p)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, src(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, p := range have {
		if want[p] == nil {
			t.Errorf("objinit_templates/%s has no source any more; run go generate ./internal/cli", p)
		}
	}
	for p, src := range want {
		got, err := os.ReadFile(filepath.Join("objinit_templates", p))
		if err != nil || !bytes.Equal(got, src()) {
			t.Errorf("objinit_templates/%s differs from its source (%v); run go generate ./internal/cli", p, err)
		}
	}
}

func runInit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	err := runObjectInit(context.Background(), m, args)
	return out.String() + errOut.String(), err
}

// scaffolded writes a scaffold for lang into a fresh dir and checks its
// README's [[objects]] entry loads through the real config loader.
func scaffolded(t *testing.T, lang string, wantInit []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "my obj") // a space, to exercise quoting
	if out, err := runInit(t, "--lang", lang, "--class", "tally", dir); err != nil {
		t.Fatalf("object init --lang %s: %v\n%s", lang, err, out)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```toml\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatalf("README.md has no toml block:\n%s", readme)
	}
	home := t.TempDir()
	cfgPath := filepath.Join(home, "agentkernel.toml")
	if err := os.WriteFile(cfgPath, block[1], 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(config.Flags{ConfigPath: cfgPath, Home: home}, nil)
	if err != nil {
		t.Fatalf("README's toml does not load: %v\n%s", err, block[1])
	}
	if len(cfg.Objects) != 1 {
		t.Fatalf("README's toml has %d [[objects]], want 1", len(cfg.Objects))
	}
	o := cfg.Objects[0]
	if o.Class != "tally" || o.AppDir != dir || !reflect.DeepEqual(o.InitCommand, wantInit) {
		t.Errorf("README's entry: class %q app_dir %q init_command %q; want tally, %q, %q", o.Class, o.AppDir, o.InitCommand, dir, wantInit)
	}
	return dir
}

// appPath maps the sandbox's /app path in an init_command to dir.
func appPath(dir, p string) string { return filepath.Join(dir, strings.TrimPrefix(p, "/app/")) }

func TestObjectInitGo(t *testing.T) {
	goBin := testenv.Command(t, "go", "https://go.dev/dl/")
	dir := scaffolded(t, "go", []string{"/app/counter"})
	build := exec.Command(goBin, "build", "-o", "counter", ".")
	build.Dir = dir
	// Offline: no proxy, no workspace, no cgo; the replace in go.mod must
	// make the copied helper enough.
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in the scaffold: %v\n%s", err, out)
	}
	base := objectservertest.StartProcess(t, exec.Command(appPath(dir, "/app/counter")))
	objectservertest.Counter(t, base)
	// The copied helper serves many objects too (isolation = "class").
	objectservertest.ManyObjects(t, base)
	checkIsolation(t, "go", dir, base)
}

func TestObjectInitPython(t *testing.T) {
	testenv.File(t, "/usr/bin/python3", "apt-get install -y python3")
	dir := scaffolded(t, "python", []string{"python3", "/app/counter.py"})
	// No PYTHONPATH: the copied helper must be found next to counter.py.
	cmd := exec.Command("/usr/bin/python3", appPath(dir, "/app/counter.py"))
	cmd.Env = withoutEnv(os.Environ(), "PYTHONPATH")
	base := objectservertest.StartProcess(t, cmd)
	objectservertest.Counter(t, base)
	checkIsolation(t, "python", dir, base)
}

func TestObjectInitNode(t *testing.T) {
	testenv.File(t, "/usr/bin/node", "apt-get install -y nodejs")
	dir := scaffolded(t, "node", []string{"node", "/app/counter.js"})
	cmd := exec.Command("/usr/bin/node", appPath(dir, "/app/counter.js"))
	cmd.Env = withoutEnv(os.Environ(), "NODE_PATH")
	base := objectservertest.StartProcess(t, cmd)
	objectservertest.Counter(t, base)
	checkIsolation(t, "node", dir, base)
}

// checkIsolation checks that the scaffold in dir, served at base, is offered
// for isolation = "class" exactly when its helper serves many objects (GET
// /__health answers X-Agentkernel-Objects: many), and that then the same
// counter code keeps two objects' counts apart in one process.
func checkIsolation(t *testing.T, lang, dir, base string) {
	t.Helper()
	resp, err := http.Get(base + objectserver.HealthPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	many := resp.Header.Get("X-Agentkernel-Objects") == "many"
	if want := objInitLangs()[lang].manyObjects; many != want {
		t.Fatalf("the %s helper serves many objects = %v, but objInitLangs()[%q].manyObjects = %v; make them agree", lang, many, lang, want)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if offered := bytes.Contains(readme, []byte(`# isolation = "class"`)); offered != many {
		t.Errorf("README.md offers isolation = \"class\": %v, want %v", offered, many)
	}
	if !many {
		return
	}
	do := func(method, path, id, body string) string {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(objectserver.HeaderObjectClass, "tally")
		req.Header.Set(objectserver.HeaderObjectID, id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s for %s: %d %s %v", method, path, id, resp.StatusCode, b, err)
		}
		return strings.TrimSpace(string(b))
	}
	do(http.MethodPost, objectserver.StoragePath, "user-1", `{"count": 10}`)
	do(http.MethodPost, objectserver.StoragePath, "user-2", `{}`)
	for _, c := range []struct{ path, id, body, want string }{
		{"/increment", "user-1", `{"amount": 5}`, `{"value":15}`},
		{"/increment", "user-2", `{"amount": 1}`, `{"value":1}`},
		{"/get", "user-1", ``, `{"value":15}`},
		{objectserver.StoragePath, "user-2", ``, `{"count":1}`},
	} {
		method := http.MethodPost
		if c.path == objectserver.StoragePath {
			method = http.MethodGet
		}
		if got := do(method, c.path, c.id, c.body); got != c.want {
			t.Errorf("%s %s for %s: %s, want %s", method, c.path, c.id, got, c.want)
		}
	}
}

func TestObjectInitFiles(t *testing.T) {
	dir := t.TempDir()
	// Flags after DIR work too.
	if out, err := runInit(t, dir, "--lang", "node"); err != nil {
		t.Fatalf("object init DIR --lang node: %v\n%s", err, out)
	}
	var names []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if want := []string{"README.md", "agentkernel-object.js", "counter.js"}; !reflect.DeepEqual(names, want) {
		t.Errorf("node scaffold has %v, want %v", names, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "counter.js"), []byte("// mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runInit(t, "--lang", "node", dir); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("init over existing files: %v, want an error mentioning --force", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "counter.js")); string(b) != "// mine\n" {
		t.Error("refused init still overwrote counter.js")
	}
	if _, err := runInit(t, "--lang", "node", "--force", dir); err != nil {
		t.Errorf("init --force: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "counter.js")); string(b) == "// mine\n" {
		t.Error("init --force did not overwrite counter.js")
	}
}

func TestObjectInitUsage(t *testing.T) {
	for name, args := range map[string][]string{
		"no dir":       {"--lang", "go"},
		"two dirs":     {"--lang", "go", "a", "b"},
		"no lang":      {t.TempDir()},
		"unknown lang": {"--lang", "rust", t.TempDir()},
		"bad class":    {"--lang", "go", "--class", "Bad Class", t.TempDir()},
		"bad flag":     {"--nope", t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := runInit(t, args...)
			if !errors.Is(err, errUsage) {
				t.Errorf("object init %q: %v, want a usage error", args, err)
			}
		})
	}
}

func withoutEnv(env []string, key string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
