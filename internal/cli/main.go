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
	"strings"
)

// Main holds the process's environment so tests can run the CLI in-process.
type Main struct {
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Environ []string

	// probed receives the flag set a command builds, when completion
	// asks a command for its flags (see commandFlags).
	probed *flag.FlagSet
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

type runFunc func(ctx context.Context, m *Main, args []string) error

// command is one entry of the command table: a group of subcommands (subs)
// or a command that runs (run). Dispatch, help and shell completion all
// read this one table, so they cannot drift apart.
type command struct {
	name    string
	aliases []string
	summary string
	run     runFunc
	subs    []command
	// words are the fixed words a command takes as arguments, offered by
	// shell completion (e.g. "bash zsh fish").
	words []string
	// internal commands run inside sandboxes, not for people: listed in
	// help, left out of completion, never asked for their flags.
	internal bool
}

// root is the whole table.
func root() command {
	return command{
		name:    "agentkernel",
		summary: "agentkernel — a self-hosted, durable runtime for AI agents",
		subs: []command{
			{name: "serve", summary: "run the daemon", run: runServe},
			{name: "worker", summary: "serve a remote daemon's self_hosted environment with this machine's sandboxes", run: runWorker},
			{name: "version", summary: "print the version (also --version)", run: runVersion},
			{name: "completion", summary: "print a shell completion script: bash, zsh or fish", run: runCompletion, words: shells},
			tenantCommand(),
			keyCommand(),
			sandboxCommand(),
			imageCommand(),
			objectCommand(),
			agentCommand(),
			envCommand(),
			deploymentCommand(),
			sessionCommand(),
			taskCommand(),
			ticketCommand(),
			vaultCommand(),
			webhookCommand(),
			{name: "guest", summary: "run the in-sandbox guest (PID 1 inside a sandbox; not for people)", run: runGuest, internal: true},
			{name: "agent-event", summary: "inside a sandbox: report a heartbeat or event to the monitor (agentkernel-agent)", run: runAgentEvent, internal: true},
		},
	}
}

// find returns the subcommand called name (or one of its aliases).
func (c command) find(name string) (command, bool) {
	for _, s := range c.subs {
		if s.name == name {
			return s, true
		}
		for _, a := range s.aliases {
			if a == name {
				return s, true
			}
		}
	}
	return command{}, false
}

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }

// Run runs the command line and returns the process exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	path, err := m.dispatch(ctx, []string{"agentkernel"}, root(), args)
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(m.Stderr, "%s: %v\n", strings.Join(path, " "), err)
		return 2
	default:
		fmt.Fprintf(m.Stderr, "%s: %v\n", strings.Join(path, " "), err)
		return 1
	}
}

// dispatch walks the table along args and runs the command it names. It
// returns the path of the command that ran (or refused), which prefixes
// its error message once.
func (m *Main) dispatch(ctx context.Context, path []string, c command, args []string) ([]string, error) {
	if c.run != nil {
		return path, c.run(ctx, m, args)
	}
	if len(args) == 0 {
		// A group alone is a usage error, like a command without its
		// arguments: the list goes to stderr.
		m.help(m.Stderr, path, c)
		return path, &ExitError{Code: 2}
	}
	if isHelp(args[0]) {
		if len(args) > 1 && args[0] == "help" {
			// `help exec` is `exec -h`.
			if sub, ok := c.find(args[1]); ok {
				return m.dispatch(ctx, append(path, sub.name), sub, []string{"-h"})
			}
		}
		m.help(m.Stdout, path, c)
		return path, nil
	}
	sub, ok := c.find(args[0])
	if !ok {
		kind := "subcommand"
		if len(path) == 1 {
			kind = "command"
		}
		return path, fmt.Errorf("%w: unknown %s %q; '%s --help' lists them", errUsage, kind, args[0], strings.Join(path, " "))
	}
	return m.dispatch(ctx, append(path, sub.name), sub, args[1:])
}

// help lists a group's subcommands, one line each.
func (m *Main) help(w io.Writer, path []string, c command) {
	name := strings.Join(path, " ")
	fmt.Fprintf(w, "%s\n\nUsage: %s <command> [flags]\n\nCommands:\n", c.summary, name)
	width := 0
	for _, s := range c.subs {
		width = max(width, len(s.name))
	}
	for _, s := range c.subs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, s.name, s.summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's subcommands or flags.\n", name)
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
	m.probed = fs
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
