package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel"
)

func ticketCommand() command {
	return command{name: "ticket", summary: "tickets: workflows of tasks", subs: []command{
		{name: "create", summary: "create a ticket and print its id", run: ticketVerb("create")},
		{name: "ls", aliases: []string{"list"}, summary: "list tickets", run: ticketVerb("ls")},
		{name: "show", aliases: []string{"get"}, summary: "show a ticket with its tasks", run: ticketVerb("show")},
	}}
}

// ticketVerb is `ticket create|ls|show`; the three share their flags.
func ticketVerb(verb string) runFunc {
	return func(ctx context.Context, m *Main, args []string) error { return runTicket(ctx, m, verb, args) }
}

func runTicket(ctx context.Context, m *Main, verb string, args []string) error {
	fs := m.newFlagSet("ticket "+verb, "ticket create TITLE [--description D] | ls [--status S] | show ID")
	var cf clientFlags
	cf.register(fs)
	desc := fs.String("description", "", "ticket description (create)")
	status := fs.String("status", "", "only tickets in this status (ls)")
	if err := parse(fs, args); err != nil {
		return err
	}
	c := cf.client(m)
	switch verb {
	case "create":
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: ticket create TITLE", errUsage)
		}
		t, err := c.Tickets().Create(ctx, agentkernel.TicketCreateParams{Title: fs.Arg(0), Description: *desc})
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(m.Stdout, t)
		}
		fmt.Fprintln(m.Stdout, t.ID)
		return nil
	case "ls":
		ts, err := c.Tickets().List(ctx, *status)
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(m.Stdout, ts)
		}
		rows := make([][]string, 0, len(ts))
		for _, t := range ts {
			rows = append(rows, []string{t.ID, t.Status, t.Title, t.CreatedAt.Local().Format(time.DateTime)})
		}
		return table(m.Stdout, []string{"ID", "STATUS", "TITLE", "CREATED"}, rows)
	case "show":
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: ticket show ID", errUsage)
		}
		t, err := c.Tickets().Get(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(m.Stdout, t)
		}
		fmt.Fprintf(m.Stdout, "id:     %s\ntitle:  %s\nstatus: %s\n", t.ID, t.Title, t.Status)
		if d := t.Diagnostics; d != nil {
			fmt.Fprintf(m.Stdout, "diagnostics: %d spawned, %d completed, %d consecutive failures, human review: %v %s\n",
				d.Attempts, d.Completed, d.ConsecutiveFailures, d.HumanReview, d.HumanReviewReason)
		}
		if r := t.Result; r != nil {
			fmt.Fprintf(m.Stdout, "result: %s (%s)\n", r.ValidationStatus, r.Result)
		}
		rows := make([][]string, 0, len(t.Tasks))
		for _, tk := range t.Tasks {
			rows = append(rows, []string{tk.ID, tk.Kind, tk.Status, tk.FailureReason, tk.SandboxID})
		}
		fmt.Fprintln(m.Stdout)
		return table(m.Stdout, []string{"TASK", "KIND", "STATUS", "REASON", "SANDBOX"}, rows)
	}
	return fmt.Errorf("%w: unknown subcommand %q", errUsage, verb)
}
