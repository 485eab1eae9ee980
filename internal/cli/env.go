package cli

import (
	"context"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
)

// envCommand manages Managed Agents API environments: where a session's
// sandbox runs. agentkernel's own sandbox settings travel as agentkernel.*
// metadata, which the official SDKs pass through unchanged.
func envCommand() command {
	return command{name: "env", summary: "Managed Agents API environments (where a session's sandbox runs)", subs: []command{
		{name: "create", summary: "create an environment and print its id", run: envCreate},
		{name: "ls", aliases: []string{"list"}, summary: "list environments", run: envList},
	}}
}

func envCreate(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("env create", "env create --name NAME [--driver process|docker] [--image IMAGE] [--sleep-after 5m] [--network none|host] [--memory-mb N] [--pids N] [--cpus N] [--self-hosted] [--json]\n\n--self-hosted makes a self_hosted environment: its sessions' tools run on workers that poll its work queue (the SDK's environment worker, with a key from key create --environment), not in the daemon's sandboxes; the sandbox flags do not apply to it.")
	var cf clientFlags
	cf.register(fs)
	name := fs.String("name", "", "the environment's name (required)")
	selfHosted := fs.Bool("self-hosted", false, "a self_hosted environment, served by workers on other hosts")
	meta := map[string]*string{
		"agentkernel.driver":      fs.String("driver", "", "sandbox driver: process or docker (default: [sandbox] driver)"),
		"agentkernel.image":       fs.String("image", "", "sandbox image (default: [sandbox] image or docker_image)"),
		"agentkernel.sleep_after": fs.String("sleep-after", "", "idle time before the sandbox hibernates, e.g. 5m"),
		"agentkernel.network":     fs.String("network", "", "none or host (default: [sandbox] network)"),
		"agentkernel.memory_mb":   fs.String("memory-mb", "", "sandbox memory limit in MiB (default: [sandbox] memory_mb)"),
		"agentkernel.pids":        fs.String("pids", "", "sandbox process limit (default: [sandbox] pids)"),
		"agentkernel.cpus":        fs.String("cpus", "", "sandbox CPU limit, e.g. 0.5 (default: [sandbox] cpus)"),
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: env create takes flags only, got %q", errUsage, fs.Args())
	}
	if *name == "" {
		return fmt.Errorf("%w: env create needs --name", errUsage)
	}
	p := anthropic.BetaEnvironmentNewParams{Name: *name}
	if *selfHosted {
		p.Config = anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}
	}
	for k, v := range meta {
		if *v != "" {
			if p.Metadata == nil {
				p.Metadata = map[string]string{}
			}
			p.Metadata[k] = *v
		}
	}
	c := cf.managedClient(m)
	e, err := c.Beta.Environments.New(ctx, p)
	if err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRaw(m, e.RawJSON())
	}
	fmt.Fprintln(m.Stdout, e.ID)
	return nil
}

func envList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("env ls", "env ls [--archived] [--json]")
	var cf clientFlags
	cf.register(fs)
	archived := fs.Bool("archived", false, "include archived environments")
	if err := parse(fs, args); err != nil {
		return err
	}
	p := anthropic.BetaEnvironmentListParams{}
	if *archived {
		p.IncludeArchived = anthropic.Bool(true)
	}
	var raws []string
	var rows [][]string
	c := cf.managedClient(m)
	pager := c.Beta.Environments.ListAutoPaging(ctx, p)
	for pager.Next() {
		e := pager.Current()
		raws = append(raws, e.RawJSON())
		rows = append(rows, []string{e.ID, e.Name, orDash(e.Metadata["agentkernel.driver"]), orDash(e.Metadata["agentkernel.image"]), e.CreatedAt})
	}
	if err := pager.Err(); err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRawList(m, raws)
	}
	return table(m.Stdout, []string{"ID", "NAME", "DRIVER", "IMAGE", "CREATED"}, rows)
}
