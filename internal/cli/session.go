package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
)

// sessionCommand drives Managed Agents API sessions through the official
// SDK.
func sessionCommand() command {
	return command{name: "session", summary: "Managed Agents API sessions", subs: []command{
		{name: "new", aliases: []string{"create"}, summary: "start a session and print its id", run: sessionNew},
		{name: "send", summary: "send a user message (--wait: follow the turn; fails if it fails)", run: sessionSend},
		{name: "tail", summary: "show a session's events as they happen", run: sessionTail},
		{name: "ls", aliases: []string{"list"}, summary: "list sessions", run: sessionList},
		{name: "rm", aliases: []string{"delete"}, summary: "delete a session and its sandbox", run: sessionRemove},
		{name: "fork", summary: "fork a session at an event, workspace included; print the new id", run: sessionFork},
		{name: "rewind", summary: "take a session back to an event (what it cuts off stays as a branch)", run: sessionRewind},
		{name: "history", summary: "show a session's turns, lineage and branches", run: sessionHistory},
	}}
}

func sessionNew(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("session new", "session new --agent AGENT_ID --env ENVIRONMENT_ID [--title TITLE] [--json]")
	var cf clientFlags
	cf.register(fs)
	agent := fs.String("agent", "", "agent id (required; the session uses its latest version)")
	env := fs.String("env", "", "environment id (required)")
	title := fs.String("title", "", "a title for people")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: session new takes flags only, got %q", errUsage, fs.Args())
	}
	if *agent == "" || *env == "" {
		return fmt.Errorf("%w: session new needs --agent and --env", errUsage)
	}
	p := anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(*agent)},
		EnvironmentID: *env,
	}
	if *title != "" {
		p.Title = anthropic.String(*title)
	}
	c := cf.managedClient(m)
	s, err := c.Beta.Sessions.New(ctx, p)
	if err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRaw(m, s.RawJSON())
	}
	fmt.Fprintln(m.Stdout, s.ID)
	return nil
}

// sessionSend sends one user.message. With --wait it then shows the
// trajectory until the session settles, like `tail --until-idle` from the
// message on.
func sessionSend(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("session send", `session send SESSION_ID "MESSAGE" [--wait] [--json]   (MESSAGE "-" reads stdin)`)
	var cf clientFlags
	cf.register(fs)
	wait := fs.Bool("wait", false, "show the agent's work until the session is idle again")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: session send takes SESSION_ID and one MESSAGE (quote it)", errUsage)
	}
	id, text := fs.Arg(0), fs.Arg(1)
	if text == "-" {
		b, err := io.ReadAll(m.Stdin)
		if err != nil {
			return err
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("%w: the message is empty", errUsage)
	}
	c := cf.managedClient(m)
	res, err := c.Beta.Sessions.Events.Send(ctx, id, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Type: anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{
				OfText: &anthropic.BetaManagedAgentsTextBlockParam{Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: text},
			}},
		}}},
	})
	if err != nil {
		return apiError(err)
	}
	if len(res.Data) == 0 {
		return fmt.Errorf("session %s: the server accepted the message but returned no event", id)
	}
	sent := res.Data[0]
	if !*wait {
		if cf.json {
			return printRaw(m, sent.RawJSON())
		}
		fmt.Fprintln(m.Stdout, sent.ID)
		return nil
	}
	t := &tailer{m: m, c: c, id: id, json: cf.json, untilIdle: true, r: newRenderer(m.Stdout)}
	t.show(sent.RawJSON())
	if err := t.follow(ctx, sent.ID); err != nil {
		return err
	}
	if t.failure != "" {
		return fmt.Errorf("the turn failed with session.error %s", t.failure)
	}
	return nil
}

func sessionList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("session ls", "session ls [--agent AGENT_ID] [--archived] [--json]")
	var cf clientFlags
	cf.register(fs)
	agent := fs.String("agent", "", "only sessions of this agent")
	archived := fs.Bool("archived", false, "include archived sessions")
	if err := parse(fs, args); err != nil {
		return err
	}
	p := anthropic.BetaSessionListParams{}
	if *agent != "" {
		p.AgentID = anthropic.String(*agent)
	}
	if *archived {
		p.IncludeArchived = anthropic.Bool(true)
	}
	var raws []string
	var rows [][]string
	c := cf.managedClient(m)
	pager := c.Beta.Sessions.ListAutoPaging(ctx, p)
	for pager.Next() {
		s := pager.Current()
		raws = append(raws, s.RawJSON())
		rows = append(rows, []string{s.ID, string(s.Status), orDash(s.Title), s.Agent.ID, s.EnvironmentID,
			fmt.Sprintf("%d/%d", s.Usage.InputTokens, s.Usage.OutputTokens), s.CreatedAt.Format(time.RFC3339)})
	}
	if err := pager.Err(); err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRawList(m, raws)
	}
	return table(m.Stdout, []string{"ID", "STATUS", "TITLE", "AGENT", "ENVIRONMENT", "TOKENS IN/OUT", "CREATED"}, rows)
}

// sessionRemove deletes a session: the runtime ends any turn, takes a
// final workspace snapshot and destroys the sandbox first.
func sessionRemove(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("session rm", "session rm SESSION_ID [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: session rm takes one session id", errUsage)
	}
	fmt.Fprintln(m.Stderr, "ending the session, snapshotting its workspace and destroying its sandbox…")
	c := cf.managedClient(m)
	res, err := c.Beta.Sessions.Delete(ctx, fs.Arg(0), anthropic.BetaSessionDeleteParams{})
	if err != nil {
		return apiError(err)
	}
	if cf.json {
		return printRaw(m, res.RawJSON())
	}
	fmt.Fprintf(m.Stdout, "deleted %s\n", fs.Arg(0))
	return nil
}
