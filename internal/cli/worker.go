package cli

import (
	"context"
	"fmt"
	"net/http"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/auth"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon"
	"github.com/agentkernel/agentkernel/internal/envworker"
)

// runWorker makes this machine a sandbox host of a remote daemon's
// self_hosted environment: a local sandbox layer (this binary's daemon on
// its own home, its API on --listen for inspection) and the environment's
// work queue served with it (internal/envworker).
func runWorker(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("worker", "worker --environment ENV_ID --url URL [--key KEY] [--home DIR] [--config FILE] [--listen ADDR] [--max-sessions N]\n\n"+
		"Serves the work queue of a self_hosted environment of the daemon at URL: each session's bash/read/write/edit/glob/grep\n"+
		"calls run in a sandbox on this machine (one per session, kept for its next turns, hibernated when idle) with the\n"+
		"sandbox settings of this machine's configuration. KEY is an environment key (key create --environment); default\n"+
		"$AGENTKERNEL_ENVIRONMENT_KEY. The local sandbox layer keeps its state in --home (default ~/.local/share/agentkernel-worker)\n"+
		"and answers on --listen (default 127.0.0.1:18889) with its own admin key there, for `agentkernel sandbox ls`.")
	env := fs.String("environment", "", "the self_hosted environment to serve (env_…; required)")
	url := fs.String("url", "", "the daemon whose environment it is, e.g. http://daemon:18888 (required)")
	key := fs.String("key", "", "the environment key (default $AGENTKERNEL_ENVIRONMENT_KEY)")
	maxSessions := fs.Int("max-sessions", 8, "sessions served at once")
	var flags config.Flags
	fs.StringVar(&flags.ConfigPath, "config", "", "configuration of the local sandbox layer (default: ./agentkernel.toml, then the home's)")
	fs.StringVar(&flags.Home, "home", "", "the local sandbox layer's data directory (default ~/.local/share/agentkernel-worker)")
	fs.StringVar(&flags.Listen, "listen", "127.0.0.1:18889", "the local sandbox layer's API address")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *key == "" {
		*key = m.getenv("AGENTKERNEL_ENVIRONMENT_KEY")
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case *env == "":
		return fmt.Errorf("%w: --environment is required", errUsage)
	case *url == "":
		return fmt.Errorf("%w: --url is required", errUsage)
	case *key == "":
		return fmt.Errorf("%w: --key (or $AGENTKERNEL_ENVIRONMENT_KEY) is required: an environment key from `agentkernel key create --environment %s`", errUsage, *env)
	case *maxSessions < 1 || *maxSessions > 1000:
		return fmt.Errorf("%w: --max-sessions must be from 1 to 1000, got %d", errUsage, *maxSessions)
	}
	if flags.Home == "" && m.getenv("AGENTKERNEL_HOME") == "" {
		// Not the home of a daemon on this machine: its own lock, store
		// and sandboxes.
		flags.Home = filepath.Join(filepath.Dir(config.DefaultHome()), "agentkernel-worker")
	}
	cfg, _, err := config.Load(flags, m.Environ)
	if err != nil {
		return err
	}
	log := newLogger(m.Stderr, cfg.Log)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := daemon.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := d.Listen(); err != nil {
		return err
	}
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	if err := waitServing(ctx, "http://"+d.Addr()+"/healthz", ran); err != nil {
		return err
	}
	tn, err := d.Store().GetTenantByName(ctx, auth.DefaultTenantName)
	if err == nil {
		var w *envworker.Worker
		w, err = envworker.New(envworker.Options{
			Client:        anthropic.NewClient(option.WithBaseURL(*url)),
			EnvironmentID: *env, EnvironmentKey: *key,
			Sandboxes: d.Sandboxes(), TenantID: tn.ID, Dir: filepath.Join(cfg.Home, "work"),
			MaxSessions: *maxSessions, Log: log,
		})
		if err == nil {
			log.Info("agentkernel worker polling", "environment", *env, "url", *url, "local_api", d.Addr(), "home", cfg.Home)
			err = w.Run(ctx)
		}
	}
	stop()
	if rerr := <-ran; err == nil {
		err = rerr
	}
	return err
}

// waitServing waits until the local daemon answers (its services started).
func waitServing(ctx context.Context, url string, ran <-chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-ran:
			return fmt.Errorf("the local sandbox layer stopped: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the local sandbox layer did not answer at %s", url)
		}
	}
}
