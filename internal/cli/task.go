package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/guest"
)

// taskCommand runs agent tasks and reads what they left.
func taskCommand() command {
	return command{name: "task", summary: "agent tasks: agents that run in a sandbox on their own", subs: []command{
		{name: "run", summary: "start a task and print its id", run: taskRun},
		{name: "ls", aliases: []string{"list"}, summary: "list tasks", run: taskList},
		{name: "get", aliases: []string{"show"}, summary: "show a task and the monitor's view of it", run: taskGet},
		{name: "logs", summary: "print a task's output", run: taskLogs},
		{name: "transcript", summary: "print a task's saved transcript", run: taskTranscript},
	}}
}

func taskRun(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("task run", "task run [--ticket ID] [--image I] [--driver D] [--env K=V]… [--transcript-path P] -- COMMAND [ARGS…]")
	var cf clientFlags
	cf.register(fs)
	var p agentkernel.TaskCreateParams
	var sb agentkernel.TaskSandbox
	var env multiFlag
	fs.StringVar(&p.TicketID, "ticket", "", "ticket (workflow) the task belongs to")
	fs.StringVar(&sb.Image, "image", "", "sandbox image")
	fs.StringVar(&sb.Driver, "driver", "", "sandbox driver: process or docker")
	fs.StringVar(&p.TranscriptPath, "transcript-path", "", "where the agent writes its transcript in the sandbox (default: its stdout/stderr)")
	fs.Var(&env, "env", "environment variable K=V (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	p.Command = fs.Args()
	if len(p.Command) == 0 {
		return fmt.Errorf("%w: task run needs the agent's command after --", errUsage)
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%w: --env %q: want K=V", errUsage, kv)
		}
		if p.Env == nil {
			p.Env = map[string]string{}
		}
		p.Env[k] = v
	}
	if sb != (agentkernel.TaskSandbox{}) {
		p.Sandbox = &sb
	}
	t, err := cf.client(m).Tasks().Create(ctx, p)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, t)
	}
	fmt.Fprintln(m.Stdout, t.ID)
	return nil
}

func taskList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("task ls", "task ls [--ticket ID] [--status S] [--kind agent|diagnostic]")
	var cf clientFlags
	cf.register(fs)
	var p agentkernel.TaskListParams
	fs.StringVar(&p.TicketID, "ticket", "", "only this ticket's tasks")
	fs.StringVar(&p.Status, "status", "", "only tasks in this status")
	fs.StringVar(&p.Kind, "kind", "", "agent or diagnostic")
	if err := parse(fs, args); err != nil {
		return err
	}
	ts, err := cf.client(m).Tasks().List(ctx, p)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, ts)
	}
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, []string{t.ID, t.Kind, t.Status, t.FailureReason, t.TicketID, t.SandboxID, t.CreatedAt.Local().Format(time.DateTime)})
	}
	return table(m.Stdout, []string{"ID", "KIND", "STATUS", "REASON", "TICKET", "SANDBOX", "CREATED"}, rows)
}

func taskGet(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("task get", "task get ID")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: task get ID", errUsage)
	}
	c := cf.client(m)
	t, err := c.Tasks().Get(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, t)
	}
	fmt.Fprintf(m.Stdout, "id:       %s\nstatus:   %s %s\nticket:   %s\nsandbox:  %s\ncommand:  %s\n", t.ID, t.Status, t.FailureReason, t.TicketID, t.SandboxID, strings.Join(t.Command, " "))
	if t.SandboxID != "" {
		if a, err := c.Sandboxes.Activity(ctx, t.SandboxID); err == nil {
			fmt.Fprintf(m.Stdout, "activity: %s: %s\n", a.State, a.Why)
		}
	}
	return nil
}

func taskLogs(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("task logs", "task logs ID [--stderr] [--follow]")
	var cf clientFlags
	cf.register(fs)
	stderr := fs.Bool("stderr", false, "show stderr instead of stdout")
	follow := fs.Bool("follow", false, "keep printing output until the agent exits")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: task logs ID", errUsage)
	}
	stream := "stdout"
	if *stderr {
		stream = "stderr"
	}
	c := cf.client(m)
	var off int64
	for {
		out, err := c.Tasks().Logs(ctx, fs.Arg(0), stream, off)
		if err != nil {
			return err
		}
		m.Stdout.Write(out.Data)
		off = out.NextOffset
		if !*follow || out.EOF {
			return nil
		}
		if len(out.Data) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

func taskTranscript(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("task transcript", "task transcript ID")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: task transcript ID", errUsage)
	}
	tr, err := cf.client(m).Tasks().Transcript(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, tr)
	}
	fmt.Fprintf(m.Stderr, "transcript %s from %s, %d bytes, saved %s\n", tr.ID, tr.Source, tr.Size, tr.SavedAt.Local().Format(time.DateTime))
	_, err = fmt.Fprint(m.Stdout, tr.Content)
	return err
}

// runAgentEvent is the agent's side inside a sandbox: the guest binary
// (/.agentkernel/guest) answers `agent-event heartbeat|event …`; tasks get
// it on PATH as agentkernel-agent.
func runAgentEvent(ctx context.Context, m *Main, args []string) error {
	if code := guest.AgentMain(ctx, args, m.Stderr); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}
