package agentkernel_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon"
)

// The seed's Go snippet, unchanged, against a real daemon whose "counter"
// class runs a small counter server from an app_dir.
func ExampleObjectsService_Call() {
	stop, err := startExampleDaemon()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	client := agentkernel.New()
	result, _ := client.Objects.Call(ctx, "counter", "user-123", agentkernel.ObjectCall{
		Method: "increment",
		Args:   map[string]any{"amount": 5},
	})
	info, _ := client.Objects.Get(ctx, "counter", "user-123")

	fmt.Println(result)
	fmt.Println(info.Status, string(info.Storage["count"]))
	// Output:
	// {"value":5}
	// Active 5
}

// startExampleDaemon runs an in-process daemon (examples get no
// *testing.T, so this does what daemontest.Start does by hand) and points
// AGENTKERNEL_URL and AGENTKERNEL_API_KEY at it, so agentkernel.New()
// finds it with no arguments. stop deletes the objects, stops the daemon
// and restores the environment.
func startExampleDaemon() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "akex")
	if err != nil {
		return nil, err
	}
	app := filepath.Join(dir, "app")
	for pkg, out := range map[string]string{
		"github.com/agentkernel/agentkernel/cmd/agentkernel":                  filepath.Join(dir, "agentkernel"),
		"github.com/agentkernel/agentkernel/internal/object/testdata/counter": filepath.Join(app, "counter"),
	} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("build %s: %v\n%s", pkg, err, b)
		}
	}
	cfg := config.Default()
	cfg.Home = filepath.Join(dir, "home")
	cfg.Listen = "127.0.0.1:0"
	cfg.Sandbox.GuestBinary = filepath.Join(dir, "agentkernel")
	cfg.Sandbox.RunDir = filepath.Join(dir, "run")
	cfg.Objects = []config.ObjectClassConfig{{Class: "counter", InitCommand: []string{"/app/counter"}, AppDir: app}}
	cfg.DurableObjects.AppRoots = []string{app}
	if err := cfg.Validate(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		err = d.Listen()
	}
	if err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	key, err := os.ReadFile(filepath.Join(cfg.Home, "admin.key"))
	if err != nil {
		cancel()
		<-done
		os.RemoveAll(dir)
		return nil, err
	}
	oldURL, oldKey := os.Getenv("AGENTKERNEL_URL"), os.Getenv("AGENTKERNEL_API_KEY")
	os.Setenv("AGENTKERNEL_URL", "http://"+d.Addr())
	os.Setenv("AGENTKERNEL_API_KEY", strings.TrimSpace(string(key)))
	return func() {
		c := agentkernel.New()
		if objs, err := c.Objects.List(context.Background(), agentkernel.ObjectListParams{}); err == nil {
			for _, o := range objs {
				_ = c.Objects.Delete(context.Background(), o.Class, o.ID)
			}
		}
		os.Setenv("AGENTKERNEL_URL", oldURL)
		os.Setenv("AGENTKERNEL_API_KEY", oldKey)
		cancel()
		<-done
		os.RemoveAll(dir)
	}, nil
}
