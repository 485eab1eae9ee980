package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel"
)

func sandboxCommand() command {
	return command{name: "sandbox", summary: "sandboxes: isolated places to run commands, with a /workspace that survives hibernation", subs: []command{
		{name: "create", summary: "create a sandbox and print its id", run: sandboxCreate},
		{name: "ls", aliases: []string{"list"}, summary: "list sandboxes", run: sandboxList},
		{name: "get", aliases: []string{"show"}, summary: "show one sandbox", run: sandboxVerb("get", (*agentkernel.SandboxesService).Get)},
		{name: "exec", summary: "run a command in a sandbox; exits with its exit code", run: sandboxExec},
		{name: "cp", summary: "copy a file into or out of a sandbox", run: sandboxCp},
		{name: "stop", summary: "snapshot the workspace and hibernate", run: sandboxVerb("stop", (*agentkernel.SandboxesService).Stop)},
		{name: "start", summary: "wake a hibernated sandbox", run: sandboxVerb("start", (*agentkernel.SandboxesService).Start)},
		{name: "snapshot", summary: "take a verified workspace backup and print its id", run: sandboxSnapshot},
		{name: "backups", summary: "list a sandbox's backups", run: sandboxBackups},
		{name: "rm", aliases: []string{"delete"}, summary: "take a final snapshot and destroy a sandbox", run: sandboxVerb("rm", (*agentkernel.SandboxesService).Delete)},
	}}
}

// sandboxVerb is a command that takes one sandbox id and answers the
// sandbox.
func sandboxVerb(verb string, op func(*agentkernel.SandboxesService, context.Context, string) (*agentkernel.Sandbox, error)) runFunc {
	return func(ctx context.Context, m *Main, args []string) error {
		return sandboxOne(ctx, m, args, verb, op)
	}
}

func sandboxCreate(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("sandbox create", "sandbox create [--driver process|docker] [--image IMAGE] [--sleep-after 5m] [--network none|host] [--memory-mb N] [--pids N] [--cpus N]")
	var cf clientFlags
	cf.register(fs)
	var p agentkernel.SandboxCreateParams
	var lim agentkernel.SandboxLimits
	fs.StringVar(&p.Driver, "driver", "", "driver: process or docker (default: the daemon's [sandbox] driver)")
	fs.StringVar(&p.Image, "image", "", "image")
	fs.StringVar(&p.SleepAfter, "sleep-after", "", "idle time before hibernation, e.g. 5m")
	fs.StringVar(&p.Network, "network", "", "none or host")
	fs.Int64Var(&lim.MemoryMB, "memory-mb", 0, "memory limit in MiB (default: the daemon's [sandbox] memory_mb)")
	fs.Int64Var(&lim.Pids, "pids", 0, "process limit (default: the daemon's [sandbox] pids)")
	fs.Float64Var(&lim.CPUs, "cpus", 0, "CPU limit, e.g. 0.5 (default: the daemon's [sandbox] cpus)")
	if err := parse(fs, args); err != nil {
		return err
	}
	// Zero cannot travel (it means "the default" on the wire) and never
	// meant "no limit": refuse it rather than quietly apply the default.
	var zero error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "memory-mb", "pids", "cpus":
			if v, err := strconv.ParseFloat(f.Value.String(), 64); err == nil && v == 0 && zero == nil {
				zero = fmt.Errorf("%w: --%s 0: every sandbox has a limit; leave the flag out for the daemon's default", errUsage, f.Name)
			}
		}
	})
	if zero != nil {
		return zero
	}
	if lim != (agentkernel.SandboxLimits{}) {
		p.Limits = &lim
	}
	fmt.Fprintln(m.Stderr, "creating sandbox…")
	sb, err := cf.client(m).Sandboxes.Create(ctx, p)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, sb)
	}
	fmt.Fprintln(m.Stdout, sb.ID)
	return nil
}

func sandboxList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("sandbox ls", "sandbox ls [--state STATE] [--json]")
	var cf clientFlags
	cf.register(fs)
	state := fs.String("state", "", "only sandboxes in this state (cold, warming, active, stopping, destroyed)")
	if err := parse(fs, args); err != nil {
		return err
	}
	list, err := cf.client(m).Sandboxes.List(ctx, *state)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, list)
	}
	rows := make([][]string, 0, len(list))
	for _, sb := range list {
		rows = append(rows, []string{sb.ID, sb.State, sb.Driver, orDash(sb.Image), sb.SleepAfter, sb.LastActivityAt.Format(time.RFC3339)})
	}
	return table(m.Stdout, []string{"ID", "STATE", "DRIVER", "IMAGE", "SLEEP AFTER", "LAST ACTIVITY"}, rows)
}

func sandboxOne(ctx context.Context, m *Main, args []string, verb string, op func(*agentkernel.SandboxesService, context.Context, string) (*agentkernel.Sandbox, error)) error {
	fs := m.newFlagSet("sandbox "+verb, "sandbox "+verb+" SANDBOX_ID")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: sandbox %s takes one sandbox id", errUsage, verb)
	}
	switch verb {
	case "stop":
		fmt.Fprintln(m.Stderr, "snapshotting the workspace and stopping…")
	case "start":
		fmt.Fprintln(m.Stderr, "waking…")
	case "rm":
		fmt.Fprintln(m.Stderr, "taking a final snapshot and destroying…")
	}
	sb, err := op(cf.client(m).Sandboxes, ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, sb)
	}
	return table(m.Stdout, []string{"ID", "STATE", "DRIVER", "GENERATION"},
		[][]string{{sb.ID, sb.State, sb.Driver, strconv.FormatInt(sb.Generation, 10)}})
}

// sandboxExec streams the command's output live and exits with its exit
// code.
func sandboxExec(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("sandbox exec", "sandbox exec [--timeout 30s] [--cwd DIR] [-e K=V] SANDBOX_ID -- COMMAND [ARGS…]")
	var cf clientFlags
	cf.register(fs)
	timeout := fs.Duration("timeout", 0, "kill the command (its whole process group) after this long")
	cwd := fs.String("cwd", "", "working directory (default /workspace)")
	var env multiFlag
	fs.Var(&env, "e", "environment variable K=V (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) < 2 {
		return fmt.Errorf("%w: sandbox exec SANDBOX_ID -- COMMAND [ARGS…]", errUsage)
	}
	id, argv := rest[0], rest[1:]
	if argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return fmt.Errorf("%w: no command given", errUsage)
	}
	p := agentkernel.ExecParams{Cwd: *cwd, TimeoutMS: timeout.Milliseconds()}
	if len(argv) == 1 {
		p.Command = argv[0] // one word: a shell string, so pipes work
	} else {
		p.Argv = argv
	}
	if len(env) > 0 {
		p.Env = map[string]string{}
		for _, kv := range env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("%w: -e %q is not K=V", errUsage, kv)
			}
			p.Env[k] = v
		}
	}
	res, err := cf.client(m).Sandboxes.ExecStream(ctx, id, p, m.Stdout, m.Stderr)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, res)
	}
	if res.TimedOut {
		fmt.Fprintf(m.Stderr, "agentkernel: command timed out after %s\n", *timeout)
	}
	if res.ExitCode != 0 {
		return &ExitError{Code: res.ExitCode}
	}
	return nil
}

// sandboxCp copies a file between the local disk and a sandbox:
// `cp LOCAL SBX:PATH` or `cp SBX:PATH LOCAL` ("-" is stdin/stdout).
func sandboxCp(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("sandbox cp", "sandbox cp LOCAL SANDBOX_ID:PATH | SANDBOX_ID:PATH LOCAL")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: sandbox cp takes a source and a destination", errUsage)
	}
	src, dst := fs.Arg(0), fs.Arg(1)
	c := cf.client(m)
	if id, p, ok := remote(dst); ok {
		var r io.Reader = m.Stdin
		if src != "-" {
			f, err := os.Open(src)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		return c.Sandboxes.WriteFile(ctx, id, p, r, 0)
	}
	if id, p, ok := remote(src); ok {
		b, err := c.Sandboxes.ReadFile(ctx, id, p)
		if err != nil {
			return err
		}
		if dst == "-" {
			_, err = m.Stdout.Write(b)
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	}
	return fmt.Errorf("%w: one side must be SANDBOX_ID:PATH", errUsage)
}

func remote(s string) (id, path string, ok bool) {
	id, path, ok = strings.Cut(s, ":")
	return id, path, ok && strings.HasPrefix(id, "sbx_") && path != ""
}

func sandboxSnapshot(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("sandbox snapshot", "sandbox snapshot SANDBOX_ID")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: sandbox snapshot takes one sandbox id", errUsage)
	}
	fmt.Fprintln(m.Stderr, "snapshotting the workspace…")
	b, err := cf.client(m).Sandboxes.Snapshot(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, b)
	}
	fmt.Fprintf(m.Stderr, "verified backup of %d bytes, sha256:%s\n", b.Size, b.SHA256)
	fmt.Fprintln(m.Stdout, b.ID)
	return nil
}

func sandboxBackups(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("sandbox backups", "sandbox backups SANDBOX_ID")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: sandbox backups takes one sandbox id", errUsage)
	}
	bs, err := cf.client(m).Sandboxes.Backups(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, bs)
	}
	rows := make([][]string, 0, len(bs))
	for _, b := range bs {
		rows = append(rows, []string{b.ID, strconv.FormatInt(b.Size, 10), strconv.FormatInt(b.Generation, 10), b.CreatedAt.Format(time.RFC3339), b.ExpiresAt.Format(time.RFC3339)})
	}
	return table(m.Stdout, []string{"ID", "BYTES", "GENERATION", "CREATED", "EXPIRES"}, rows)
}

type multiFlag []string

func (f *multiFlag) String() string     { return strings.Join(*f, ",") }
func (f *multiFlag) Set(s string) error { *f = append(*f, s); return nil }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
