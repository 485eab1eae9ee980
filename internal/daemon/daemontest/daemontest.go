// Package daemontest starts a real in-process agentkernel daemon for tests
// that go through the public surface (HTTP API, SDK, CLI).
package daemontest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

var (
	guestOnce sync.Once
	guestPath string
	guestErr  error
)

// GuestBinary builds the static guest once per test process (the test
// binary itself is built with cgo for -race, so it cannot be injected).
func GuestBinary(t testing.TB) string {
	t.Helper()
	guestOnce.Do(func() {
		dir, err := testenv.ProcessTempDir("akguest")
		if err != nil {
			guestErr = err
			return
		}
		guestPath = filepath.Join(dir, "agentkernel")
		cmd := exec.Command("go", "build", "-o", guestPath, "github.com/agentkernel/agentkernel/cmd/agentkernel")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			guestErr = fmt.Errorf("build static agentkernel: %v\n%s", err, out)
		}
	})
	if guestErr != nil {
		t.Fatal(guestErr)
	}
	return guestPath
}

// Daemon is a running test daemon.
type Daemon struct {
	*daemon.Daemon
	Config   config.Config
	URL      string
	AdminKey string

	stopOnce sync.Once
	stopErr  error
	stop     func() error
}

// Stop destroys the daemon's sandboxes (they would outlive it) and shuts
// it down as SIGTERM does, returning what Run returned. Cleanup calls it
// too; calling it again returns the same result.
func (d *Daemon) Stop() error {
	d.stopOnce.Do(func() { d.stopErr = d.stop() })
	return d.stopErr
}

// Option adjusts the configuration before start.
type Option func(*config.Config)

// Start runs a daemon on 127.0.0.1:0 with a fresh home and SQLite store
// (or Postgres when engine is set by an option) and stops it at cleanup.
func Start(t testing.TB, opts ...Option) *Daemon {
	t.Helper()
	return StartLogged(t, nil, opts...)
}

// StartLogged is Start with the daemon's log (debug level) written to w
// as well, so a test can read everything the daemon logged.
func StartLogged(t testing.TB, logTo io.Writer, opts ...Option) *Daemon {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Sandbox.GuestBinary = GuestBinary(t)
	run, err := os.MkdirTemp("", "akd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	cfg.Sandbox.RunDir = run
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var w io.Writer = io.Discard
	if os.Getenv("AGENTKERNEL_TEST_LOG") != "" {
		w = os.Stderr
	}
	if logTo != nil {
		w = io.MultiWriter(w, logTo)
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	td := &Daemon{Daemon: d, Config: cfg, URL: "http://" + d.Addr()}
	td.stop = func() error {
		// Sandboxes outlive the daemon by design; a test must not leave
		// them (or the driver goroutines that reap them) behind.
		if list, err := d.Sandboxes().List(context.Background(), "", ""); err == nil {
			for _, in := range list {
				_, _ = d.Sandboxes().Destroy(context.Background(), "", in.ID)
			}
		}
		cancel()
		return <-done
	}
	t.Cleanup(func() {
		if err := td.Stop(); err != nil {
			t.Errorf("daemon run: %v", err)
		}
	})
	key, err := os.ReadFile(filepath.Join(cfg.Home, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	td.AdminKey = strings.TrimSpace(string(key))
	return td
}
