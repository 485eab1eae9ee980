package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon"
)

func runServe(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("serve", "serve [--config FILE] [--listen ADDR] [--home DIR]")
	var flags config.Flags
	fs.StringVar(&flags.ConfigPath, "config", "", "configuration file (default: ./agentkernel.toml, then $AGENTKERNEL_HOME/agentkernel.toml)")
	fs.StringVar(&flags.Listen, "listen", "", "listen address (default 127.0.0.1:18888; env AGENTKERNEL_LISTEN)")
	fs.StringVar(&flags.Home, "home", "", "data directory (default ~/.local/share/agentkernel; env AGENTKERNEL_HOME)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	cfg, src, err := config.Load(flags, m.Environ)
	if err != nil {
		return err
	}
	log := newLogger(m.Stderr, cfg.Log)
	if src.File != "" {
		log.Info("loaded config", "file", src.File)
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := daemon.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

func newLogger(w io.Writer, c config.LogConfig) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
