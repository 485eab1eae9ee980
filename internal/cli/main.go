// Package cli is the agentkernel command line: `serve`, `version` and the
// verbs that talk to a daemon through the Go SDK. One file per command
// (Litestream's layout); cmd/agentkernel only calls Main.Run.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Main holds the process's environment so tests can run the CLI in-process.
type Main struct {
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Environ []string
}

// NewMain returns a Main bound to the real process.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ()}
}

// ExitError carries a specific exit code (e.g. a sandbox command's).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// errUsage marks errors caused by wrong usage (exit 2).
var errUsage = errors.New("usage")

type command struct {
	summary string
	run     func(ctx context.Context, m *Main, args []string) error
}

func (m *Main) commands() map[string]command {
	return map[string]command{
		"serve":   {"run the daemon", runServe},
		"version": {"print the version", runVersion},
		"key":     {"manage API keys: create | ls | revoke (admin)", runKey},
		"tenant":  {"manage tenants: create | ls (admin)", runTenant},
		"sandbox": {"sandboxes: create | ls | get | exec | cp | stop | start | snapshot | backups | rm", runSandbox},
		"image":   {"process-driver images: import NAME TARBALL | ls | rm NAME", runImage},
		"object":  {"durable objects: call | get | ls | rm | alarm set|ls|rm | hibernate | checkpoint | define | classes | init", runObject},
		"guest":   {"run the in-sandbox guest (PID 1 inside a sandbox; not for people)", runGuest},
		"agent":   {"Managed Agents API agents: create | ls", runAgent},
		"env":     {"Managed Agents API environments: create | ls", runEnv},
		"session": {"agent sessions: new | send | tail | ls | rm", runSession},
		"task":    {"agent tasks: run | ls | get | logs | transcript", runTask},
		"ticket":  {"tickets (workflows of tasks): create | ls | show", runTicket},

		"agent-event": {"inside a sandbox: report a heartbeat or event to the monitor (agentkernel-agent)", runAgentEvent},
	}
}

// Run runs the command line and returns the process exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		m.usage(m.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := m.commands()[args[0]]
	if !ok {
		fmt.Fprintf(m.Stderr, "agentkernel: unknown command %q\n\n", args[0])
		m.usage(m.Stderr)
		return 2
	}
	err := cmd.run(ctx, m, args[1:])
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(m.Stderr, "agentkernel %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(m.Stderr, "agentkernel %s: %v\n", args[0], err)
		return 1
	}
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprintln(w, "agentkernel — a self-hosted, durable runtime for AI agents")
	fmt.Fprintln(w, "\nUsage: agentkernel <command> [flags]\n\nCommands:")
	cmds := m.commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'agentkernel <command> -h' for a command's flags.")
}

// reorder moves flags (and their values) before the positional arguments.
func reorder(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // unknown: let Parse report it
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	if len(pos) > 0 && pos[0] != "--" {
		pos = append([]string{"--"}, pos...)
	}
	return append(flags, pos...)
}

func (m *Main) getenv(k string) string {
	for i := len(m.Environ) - 1; i >= 0; i-- {
		if key, v, ok := strings.Cut(m.Environ[i], "="); ok && key == k {
			return v
		}
	}
	return ""
}

// newFlagSet makes a flag set that reports errors instead of exiting.
func (m *Main) newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("agentkernel "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(m.Stderr, "Usage: agentkernel %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags wherever they appear among the positional arguments
// (`sandbox get ID --json` works as well as `sandbox get --json ID`);
// everything after a literal "--" is positional. Flag errors are usage
// errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(reorder(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
