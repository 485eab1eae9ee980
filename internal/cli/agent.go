package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
)

// agentCommand manages Managed Agents API agents through the official SDK.
func agentCommand() command {
	return command{name: "agent", summary: "Managed Agents API agents", subs: []command{
		{name: "create", summary: "create an agent and print its id", run: agentCreate},
		{name: "ls", aliases: []string{"list"}, summary: "list agents", run: agentList},
	}}
}

func agentCreate(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("agent create", "agent create --name NAME --model MODEL [--system PROMPT] [--tools agent_toolset|none] [--json]")
	var cf clientFlags
	cf.register(fs)
	name := fs.String("name", "", "the agent's name (required)")
	model := fs.String("model", "", `model id, e.g. claude-sonnet-4-5 or a name from [models] in agentkernel.toml (required)`)
	system := fs.String("system", "", "system prompt")
	tools := fs.String("tools", "agent_toolset", "agent_toolset (bash, read, write, edit, glob, grep in the session's sandbox) or none")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: agent create takes flags only, got %q", errUsage, fs.Args())
	}
	if *name == "" || *model == "" {
		return fmt.Errorf("%w: agent create needs --name and --model", errUsage)
	}
	p := anthropic.BetaAgentNewParams{Name: *name, Model: anthropic.BetaManagedAgentsModelConfigParams{ID: *model}}
	if *system != "" {
		p.System = anthropic.String(*system)
	}
	switch *tools {
	case "agent_toolset":
		p.Tools = []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401,
		}}}
	case "none":
	default:
		return fmt.Errorf("%w: --tools %q: want agent_toolset or none", errUsage, *tools)
	}
	c := cf.managedClient(m)
	a, err := c.Beta.Agents.New(ctx, p)
	if err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRaw(m, a.RawJSON())
	}
	fmt.Fprintln(m.Stdout, a.ID)
	return nil
}

func agentList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("agent ls", "agent ls [--archived] [--json]")
	var cf clientFlags
	cf.register(fs)
	archived := fs.Bool("archived", false, "include archived agents")
	if err := parse(fs, args); err != nil {
		return err
	}
	p := anthropic.BetaAgentListParams{}
	if *archived {
		p.IncludeArchived = anthropic.Bool(true)
	}
	c := cf.managedClient(m)
	var raws []string
	var rows [][]string
	pager := c.Beta.Agents.ListAutoPaging(ctx, p)
	for pager.Next() {
		a := pager.Current()
		raws = append(raws, a.RawJSON())
		rows = append(rows, []string{a.ID, a.Name, a.Model.ID, fmt.Sprint(a.Version), fmt.Sprint(len(a.Tools)), a.CreatedAt.Format(time.RFC3339)})
	}
	if err := pager.Err(); err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRawList(m, raws)
	}
	return table(m.Stdout, []string{"ID", "NAME", "MODEL", "VERSION", "TOOLS", "CREATED"}, rows)
}
