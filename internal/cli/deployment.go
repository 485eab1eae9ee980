package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
)

// deploymentCommand manages Managed Agents API deployments: an agent's
// sessions started by hand or on a cron schedule.
func deploymentCommand() command {
	return command{name: "deployment", summary: "Managed Agents API deployments (sessions started by hand or on a cron schedule)", subs: []command{
		{name: "create", summary: "create a deployment and print its id", run: deploymentCreate},
		{name: "ls", aliases: []string{"list"}, summary: "list deployments", run: deploymentList},
		{name: "get", summary: "print a deployment as JSON", run: deploymentByID("get")},
		{name: "pause", summary: "pause a deployment's schedule", run: deploymentByID("pause")},
		{name: "unpause", summary: "resume a deployment's schedule from now", run: deploymentByID("unpause")},
		{name: "run", summary: "run a deployment now and print the run's session id", run: deploymentByID("run")},
		{name: "runs", summary: "list a deployment's runs", run: deploymentRuns},
	}}
}

func deploymentCreate(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("deployment create", "deployment create --agent ID --environment ID --name NAME --message TEXT [--cron EXPR --timezone ZONE] [--json]")
	var cf clientFlags
	cf.register(fs)
	agent := fs.String("agent", "", "the agent's id; its latest version is pinned (required)")
	env := fs.String("environment", "", "the environment's id (required)")
	name := fs.String("name", "", "the deployment's name (required)")
	msg := fs.String("message", "", "the user message each run's session starts with (required)")
	cron := fs.String("cron", "", "5-field cron schedule, e.g. \"0 9 * * 1-5\" (default: manual runs only)")
	tz := fs.String("timezone", "UTC", "IANA timezone of --cron")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: deployment create takes flags only, got %q", errUsage, fs.Args())
	}
	if *agent == "" || *env == "" || *name == "" || *msg == "" {
		return fmt.Errorf("%w: deployment create needs --agent, --environment, --name and --message", errUsage)
	}
	p := anthropic.BetaDeploymentNewParams{
		Agent: anthropic.BetaDeploymentNewParamsAgentUnion{OfString: anthropic.String(*agent)}, EnvironmentID: *env, Name: *name,
		InitialEvents: []anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Type: anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{
				Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: *msg}}},
		}}},
	}
	if *cron != "" {
		p.Schedule = anthropic.BetaManagedAgentsScheduleParams{Expression: *cron, Timezone: *tz, Type: anthropic.BetaManagedAgentsScheduleParamsTypeCron}
	}
	c := cf.managedClient(m)
	d, err := c.Beta.Deployments.New(ctx, p)
	if err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRaw(m, d.RawJSON())
	}
	fmt.Fprintln(m.Stdout, d.ID)
	return nil
}

func deploymentList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("deployment ls", "deployment ls [--archived] [--json]")
	var cf clientFlags
	cf.register(fs)
	archived := fs.Bool("archived", false, "include archived deployments")
	if err := parse(fs, args); err != nil {
		return err
	}
	p := anthropic.BetaDeploymentListParams{}
	if *archived {
		p.IncludeArchived = anthropic.Bool(true)
	}
	var raws []string
	var rows [][]string
	c := cf.managedClient(m)
	pager := c.Beta.Deployments.ListAutoPaging(ctx, p)
	for pager.Next() {
		d := pager.Current()
		raws = append(raws, d.RawJSON())
		sched, next := "-", "-"
		if d.Schedule.Expression != "" {
			sched = d.Schedule.Expression + " " + d.Schedule.Timezone
			if len(d.Schedule.UpcomingRunsAt) > 0 {
				next = d.Schedule.UpcomingRunsAt[0].Format(time.RFC3339)
			}
		}
		status := string(d.Status)
		if !d.ArchivedAt.IsZero() {
			status = "archived"
		}
		rows = append(rows, []string{d.ID, d.Name, d.Agent.ID, status, sched, next})
	}
	if err := pager.Err(); err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRawList(m, raws)
	}
	return table(m.Stdout, []string{"ID", "NAME", "AGENT", "STATUS", "SCHEDULE", "NEXT RUN"}, rows)
}

// deploymentByID runs one call on a deployment: get prints it, pause and
// unpause print its status, run prints the run's session.
func deploymentByID(verb string) func(ctx context.Context, m *Main, args []string) error {
	return func(ctx context.Context, m *Main, args []string) error {
		fs := m.newFlagSet("deployment "+verb, "deployment "+verb+" ID [--json]")
		var cf clientFlags
		cf.register(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: deployment %s takes one deployment id", errUsage, verb)
		}
		id, c := fs.Arg(0), cf.managedClient(m)
		var d *anthropic.BetaManagedAgentsDeployment
		var err error
		switch verb {
		case "get":
			d, err = c.Beta.Deployments.Get(ctx, id, anthropic.BetaDeploymentGetParams{})
		case "pause":
			d, err = c.Beta.Deployments.Pause(ctx, id, anthropic.BetaDeploymentPauseParams{})
		case "unpause":
			d, err = c.Beta.Deployments.Unpause(ctx, id, anthropic.BetaDeploymentUnpauseParams{})
		case "run":
			r, err := c.Beta.Deployments.Run(ctx, id, anthropic.BetaDeploymentRunParams{})
			if err != nil {
				return apiError(err)
			}
			if cf.json {
				return printRaw(m, r.RawJSON())
			}
			if r.Error.Type != "" {
				return fmt.Errorf("run %s could not start its session: %s: %s", r.ID, r.Error.Type, r.Error.Message)
			}
			fmt.Fprintln(m.Stdout, r.SessionID)
			return nil
		}
		if err != nil {
			return apiError(err)
		}
		if cf.json || verb == "get" {
			return printRaw(m, d.RawJSON())
		}
		fmt.Fprintf(m.Stdout, "%s %s\n", d.ID, d.Status)
		return nil
	}
}

func deploymentRuns(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("deployment runs", "deployment runs ID [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: deployment runs takes one deployment id", errUsage)
	}
	var raws []string
	var rows [][]string
	c := cf.managedClient(m)
	pager := c.Beta.DeploymentRuns.ListAutoPaging(ctx, anthropic.BetaDeploymentRunListParams{DeploymentID: anthropic.String(fs.Arg(0))})
	for pager.Next() {
		r := pager.Current()
		raws = append(raws, r.RawJSON())
		outcome := r.SessionID
		if r.Error.Type != "" {
			outcome = r.Error.Type + ": " + strings.SplitN(r.Error.Message, "\n", 2)[0]
		}
		rows = append(rows, []string{r.ID, r.TriggerContext.Type, r.CreatedAt.Format(time.RFC3339), orDash(outcome)})
	}
	if err := pager.Err(); err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRawList(m, raws)
	}
	return table(m.Stdout, []string{"ID", "TRIGGER", "CREATED", "SESSION OR ERROR"}, rows)
}
