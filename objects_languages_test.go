package agentkernel_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/sandbox/docker"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// helperApp is one in-sandbox helper library's counter example, laid out in
// an app_dir the way a user would ship it.
type helperApp struct {
	lang    string
	appDir  string
	command []string
	missing string // why this language cannot run here ("" = it can)
}

// goHelperApp builds the objectserver counter example statically: the
// sandbox (busybox under docker) has no libc to link against.
func goHelperApp(t *testing.T) helperApp {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "counter"), "github.com/agentkernel/agentkernel/objectserver/examples/counter")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the objectserver counter example: %v\n%s", err, out)
	}
	return helperApp{lang: "go", appDir: dir, command: []string{"/app/counter"}}
}

// scriptHelperApp copies a helper library and its counter example, as
// committed, into an app_dir. files maps a path under the app_dir to a path
// in this repository. The process driver mounts the host's /usr read-only,
// so the host's interpreter is the sandbox's.
func scriptHelperApp(t *testing.T, lang, interpreter string, files map[string]string, command []string) helperApp {
	t.Helper()
	if _, err := os.Stat(interpreter); err != nil {
		return helperApp{lang: lang, missing: interpreter + " is not installed on this host (the process driver uses the host's /usr)"}
	}
	dir := t.TempDir()
	for dst, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return helperApp{lang: lang, appDir: dir, command: command}
}

// dockerReachable says why the docker driver cannot run here, or "".
func dockerReachable(ctx context.Context) string {
	drv, err := docker.New("", nil)
	if err != nil {
		return "docker client: " + err.Error()
	}
	defer drv.Close()
	if err := drv.Check(ctx); err != nil {
		return "dockerd not reachable: " + err.Error()
	}
	if err := drv.CheckImage(ctx, docker.DefaultImage); err != nil {
		return docker.DefaultImage + " is missing (scripts/docker-image/build.sh builds it): " + err.Error()
	}
	return ""
}

// Issue 4: a counter keeps its value across hibernate and wake in both
// storage modes and with each helper language (Go, Python, Node), on the
// process driver, and with the Go helper on docker when dockerd is there.
func TestObjectHelpersSurviveHibernation(t *testing.T) {
	ctx := context.Background()
	apps := []helperApp{
		goHelperApp(t),
		scriptHelperApp(t, "py", "/usr/bin/python3", map[string]string{
			"agentkernel_object.py": "sdk/python/agentkernel_object.py",
			"counter.py":            "sdk/python/examples/counter.py",
		}, []string{"python3", "/app/counter.py"}),
		// The example requires "../agentkernel-object": keep the SDK's
		// layout so the committed file runs unchanged.
		scriptHelperApp(t, "node", "/usr/bin/node", map[string]string{
			"agentkernel-object.js": "sdk/node/agentkernel-object.js",
			"examples/counter.js":   "sdk/node/examples/counter.js",
		}, []string{"node", "/app/examples/counter.js"}),
	}
	noDocker := dockerReachable(ctx)

	type run struct {
		class, driver, mode string
		app                 helperApp
	}
	var runs []run
	for _, app := range apps {
		for _, mode := range []string{"snapshot", "write-through"} {
			runs = append(runs, run{"counter-" + app.lang + "-" + mode, "process", mode, app})
		}
	}
	for _, mode := range []string{"snapshot", "write-through"} {
		// busybox has neither python nor node: Go only.
		runs = append(runs, run{"counter-go-docker-" + mode, "docker", mode, apps[0]})
	}

	d := daemontest.Start(t, func(c *config.Config) {
		for _, r := range runs {
			if r.app.missing != "" || (r.driver == "docker" && noDocker != "") {
				continue
			}
			c.Objects = append(c.Objects, config.ObjectClassConfig{
				Class: r.class, Driver: r.driver, StorageMode: r.mode,
				InitCommand: r.app.command, AppDir: r.app.appDir,
			})
			c.DurableObjects.AppRoots = append(c.DurableObjects.AppRoots, r.app.appDir)
		}
	})
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))

	for _, r := range runs {
		t.Run(r.class, func(t *testing.T) {
			if r.app.missing != "" {
				testenv.Unavailable(t, r.app.lang+" helper", r.app.missing)
			}
			if r.driver == "docker" && noDocker != "" {
				testenv.Unavailable(t, "docker", noDocker)
			}
			t.Cleanup(func() { _ = c.Objects.Delete(context.Background(), r.class, "a") })
			for i := int64(1); i <= 3; i++ {
				res, err := c.Objects.Call(ctx, r.class, "a", agentkernel.ObjectCall{Method: "increment"})
				if err != nil {
					t.Fatalf("increment %d: %v", i, err)
				}
				if got := value(t, res); got != i {
					t.Fatalf("increment %d answered %d", i, got)
				}
			}
			o, err := c.Objects.Hibernate(ctx, r.class, "a")
			if err != nil || o.Status != "Hibernating" {
				t.Fatalf("hibernate: %+v %v", o, err)
			}
			// The sandbox is really stopped: the value must come back from
			// the persisted storage, not from a still-running server.
			sb, err := c.Sandboxes.Get(ctx, o.SandboxID)
			if err != nil || sb.State != "cold" {
				t.Fatalf("sandbox after hibernate: %+v %v", sb, err)
			}
			info, err := c.Objects.Get(ctx, r.class, "a")
			if err != nil {
				t.Fatal(err)
			}
			if info.Status != "Hibernating" || info.StorageMode != r.mode || info.StorageSource != "persisted" || string(info.Storage["count"]) != "3" {
				t.Fatalf("get hibernating: status %s mode %s source %s storage %v", info.Status, info.StorageMode, info.StorageSource, info.Storage)
			}
			res, err := c.Objects.Call(ctx, r.class, "a", agentkernel.ObjectCall{Method: "increment"})
			if err != nil {
				t.Fatalf("increment after hibernation (auto-wake): %v", err)
			}
			if got := value(t, res); got != 4 {
				t.Fatalf("increment after wake answered %d, want 4: the count was lost", got)
			}
			info, err = c.Objects.Get(ctx, r.class, "a")
			if err != nil || info.Status != "Active" || string(info.Storage["count"]) != "4" {
				t.Fatalf("get after wake: %+v %v", info, err)
			}
		})
	}
}
