package guest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Main is `agentkernel guest`: it parses args (without the program and
// subcommand names), serves until SIGTERM/SIGINT or ctx ends, and returns
// the process exit code.
func Main(ctx context.Context, args []string) int {
	return run(ctx, args, os.Stderr)
}

const guestUsage = `agentkernel guest is the program that runs as PID 1 inside every sandbox;
the daemon starts it, hands it the sandbox's secret and talks to it over a
unix socket. It is not meant to be run by hand.

The daemon starts it as:
  guest --listen-fd N --secret-fd M [flags]   (process driver: the socket and
                                               the secret come as open files)
  guest --socket PATH --secret-fd 0 [flags]   (docker driver: the secret comes
                                               on stdin)

Flags:
`

func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == execMode {
		return execWithRlimit(args[1:])
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("guest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, guestUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.SocketPath, "socket", "", "unix socket to serve the daemon on")
	listenFD := fs.Int("listen-fd", -1, "inherited listening unix socket to serve the daemon on (instead of --socket)")
	secretFD := fs.Int("secret-fd", -1, "inherited file to read the sandbox's secret from (one hex line)")
	fs.StringVar(&cfg.AgentSocketPath, "agent-socket", cfg.AgentSocketPath, "unix socket that takes agent events from inside the sandbox")
	fs.StringVar(&cfg.RuntimeDir, "runtime-dir", cfg.RuntimeDir, "directory for op records and agent events (default: .agentkernel in the work dir)")
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "directory for background process output")
	fs.StringVar(&cfg.WorkDir, "workdir", cfg.WorkDir, "default cwd and base of relative paths")
	fs.StringVar(&cfg.ProxyTarget, "proxy-target", cfg.ProxyTarget, "where /proxy/ requests go")
	fs.StringVar(&cfg.EgressListen, "egress-listen", "", "address in the sandbox to forward to the egress proxy (e.g. 127.0.0.1:3128)")
	fs.StringVar(&cfg.EgressSocket, "egress-socket", "", "the egress proxy's unix socket")
	fs.StringVar(&cfg.EgressCA, "egress-ca", "", "the egress proxy's CA certificate, appended to the trust store")
	fs.StringVar(&cfg.CABundle, "ca-bundle", "", "where to write the trust store with the egress CA appended")
	fs.Uint64Var(&cfg.ChildRlimitAS, "child-rlimit-as", 0, "RLIMIT_AS in bytes for every command (0: none)")
	poolFD := fs.Int("pool-fd", -1, "inherited read end of the daemon's pool pipe: the guest ends when it closes before the sandbox is assigned")
	reapAll := fs.Bool("reap-all", os.Getpid() == 1, "reap every child (default when PID 1)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (cfg.SocketPath == "") == (*listenFD < 0) || *secretFD < 0 {
		fs.Usage()
		fmt.Fprintln(stderr, "\nguest: need --secret-fd and one of --socket or --listen-fd")
		return 2
	}
	cfg.ReapAll = *reapAll
	cfg.SelfArgv = os.Args[:len(os.Args)-len(args)]
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))

	// Nothing the guest inherited may reach the commands it starts, and
	// nothing in the sandbox may read the guest's memory, environment or
	// files (/proc/1/mem, /proc/1/fd, pidfd_getfd): the secret and the
	// daemon's socket live there.
	keep := map[int]bool{*listenFD: true, *secretFD: true}
	if *poolFD >= 0 {
		keep[*poolFD] = true
	}
	if err := closeOnExecInherited(keep); err != nil {
		fmt.Fprintln(stderr, "guest:", err)
		return 1
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(stderr, "guest: prctl(PR_SET_DUMPABLE, 0):", err)
		return 1
	}
	secret, err := readSecretFD(*secretFD)
	if err != nil {
		fmt.Fprintln(stderr, "guest:", err)
		return 1
	}
	cfg.Secret = secret
	if *listenFD >= 0 {
		f := os.NewFile(uintptr(*listenFD), "daemon-socket")
		ln, err := net.FileListener(f) // a close-on-exec duplicate
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "guest: --listen-fd %d: %v\n", *listenFD, err)
			return 1
		}
		cfg.Listener = ln
	}

	if *poolFD >= 0 {
		// Non-blocking, so that os.File polls it and the assignment's
		// Close ends the pending read.
		if err := unix.SetNonblock(*poolFD, true); err != nil {
			fmt.Fprintf(stderr, "guest: --pool-fd %d: %v\n", *poolFD, err)
			return 1
		}
		unix.CloseOnExec(*poolFD)
		cfg.PoolPipe = os.NewFile(uintptr(*poolFD), "pool-pipe")
	}
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

// readSecretFD reads the secret from fd and closes it; stdin (fd 0) is
// replaced with /dev/null.
func readSecretFD(fd int) ([]byte, error) {
	f := os.NewFile(uintptr(fd), "secret")
	secret, err := ReadSecret(f)
	f.Close()
	if fd == 0 {
		if null, err := os.Open(os.DevNull); err == nil {
			_ = unix.Dup3(int(null.Fd()), 0, 0)
			null.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--secret-fd %d: %w", fd, err)
	}
	return secret, nil
}

// closeOnExecInherited marks every file descriptor above stderr close-on-
// exec, except those in keep (which the guest consumes and closes).
func closeOnExecInherited(keep map[int]bool) error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list inherited files: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("list inherited files: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 || keep[fd] {
			continue
		}
		unix.CloseOnExec(fd)
	}
	return nil
}
