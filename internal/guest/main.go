package guest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main is `agentkernel guest`: it parses args (without the program and
// subcommand names), serves until SIGTERM/SIGINT or ctx ends, and returns
// the process exit code.
func Main(ctx context.Context, args []string) int {
	return run(ctx, args, os.Stderr)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == execMode {
		return execWithRlimit(args[1:])
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("guest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.SocketPath, "socket", cfg.SocketPath, "unix socket to serve on")
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "directory for background process output")
	fs.StringVar(&cfg.WorkDir, "workdir", cfg.WorkDir, "default cwd and base of relative paths")
	fs.StringVar(&cfg.ProxyTarget, "proxy-target", cfg.ProxyTarget, "where /proxy/ requests go")
	fs.Uint64Var(&cfg.ChildRlimitAS, "child-rlimit-as", 0, "RLIMIT_AS in bytes for every command (0: none)")
	reapAll := fs.Bool("reap-all", os.Getpid() == 1, "reap every child (default when PID 1)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.ReapAll = *reapAll
	cfg.SelfArgv = os.Args[:len(os.Args)-len(args)]
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := NewServer(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := srv.Serve(ctx); err != nil {
		cfg.Logger.Error("guest failed", "err", err)
		return 1
	}
	return 0
}
