package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel"
)

func webhookCommand() command {
	return command{name: "webhook", summary: "webhook endpoints the tenant's events are delivered to", subs: []command{
		{name: "create", summary: "register an endpoint and print its signing secret (shown only now)", run: webhookCreate},
		{name: "ls", aliases: []string{"list"}, summary: "list endpoints", run: webhookList},
		{name: "rm", aliases: []string{"delete"}, summary: "delete an endpoint and its deliveries", run: webhookDelete},
		{name: "deliveries", summary: "list an endpoint's deliveries", run: webhookDeliveries},
		{name: "redeliver", summary: "send a delivery again", run: webhookRedeliver},
	}}
}

func webhookCreate(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("webhook create", "webhook create URL --event TYPE [--event TYPE …] [--description TEXT] [--json]\n\n"+
		"Prints the endpoint's id, then its whsec_… secret (verify deliveries with it: the official SDK's\n"+
		"option.WithWebhookKey(secret) and Beta.Webhooks.Unwrap).")
	var cf clientFlags
	cf.register(fs)
	var events multiFlag
	fs.Var(&events, "event", "an event type to deliver (repeat; e.g. session.status_idled)")
	desc := fs.String("description", "", "a note on the endpoint")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: webhook create takes one URL", errUsage)
	}
	w, err := cf.client(m).Webhooks.Create(ctx, agentkernel.WebhookCreateParams{URL: fs.Arg(0), EventTypes: events, Description: *desc})
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, w)
	}
	fmt.Fprintf(m.Stderr, "created webhook %s for %s; its secret is shown only now\n", w.ID, strings.Join(w.EventTypes, ", "))
	fmt.Fprintln(m.Stdout, w.ID)
	fmt.Fprintln(m.Stdout, w.Secret)
	return nil
}

func webhookList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("webhook ls", "webhook ls [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	ws, err := cf.client(m).Webhooks.List(ctx)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, ws)
	}
	rows := make([][]string, 0, len(ws))
	for _, w := range ws {
		rows = append(rows, []string{w.ID, w.URL, strings.Join(w.EventTypes, ","), w.CreatedAt.Format(time.RFC3339)})
	}
	return table(m.Stdout, []string{"ID", "URL", "EVENTS", "CREATED"}, rows)
}

func webhookDelete(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("webhook rm", "webhook rm ID")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: webhook rm takes one id", errUsage)
	}
	if err := cf.client(m).Webhooks.Delete(ctx, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "deleted webhook %s\n", fs.Arg(0))
	return nil
}

func webhookDeliveries(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("webhook deliveries", "webhook deliveries ID [--status pending|delivered|dead] [--after-seq N] [--limit N] [--json]")
	var cf clientFlags
	cf.register(fs)
	status := fs.String("status", "", "only deliveries in this state")
	after := fs.Int64("after-seq", 0, "only deliveries after this seq")
	limit := fs.Int("limit", 100, "at most this many")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: webhook deliveries takes one webhook id", errUsage)
	}
	ds, err := cf.client(m).Webhooks.Deliveries(ctx, fs.Arg(0), agentkernel.WebhookDeliveriesParams{AfterSeq: *after, Limit: *limit, Status: *status})
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, ds)
	}
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		rows = append(rows, []string{strconv.FormatInt(d.Seq, 10), d.ID, d.EventType, d.ResourceID, d.Status,
			strconv.FormatInt(d.Attempts, 10), d.LastError})
	}
	return table(m.Stdout, []string{"SEQ", "ID", "EVENT", "RESOURCE", "STATUS", "ATTEMPTS", "LAST ERROR"}, rows)
}

func webhookRedeliver(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("webhook redeliver", "webhook redeliver WEBHOOK_ID DELIVERY_ID [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: webhook redeliver takes a webhook id and a delivery id", errUsage)
	}
	d, err := cf.client(m).Webhooks.Redeliver(ctx, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, d)
	}
	fmt.Fprintf(m.Stderr, "delivery %s is pending again\n", d.ID)
	return nil
}
