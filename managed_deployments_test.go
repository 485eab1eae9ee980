package agentkernel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

func deploymentEvents(text string) []anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion {
	return []anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion{{
		OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{
				OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text, Type: anthropic.BetaManagedAgentsTextBlockTypeText},
			}},
			Type: anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
		},
	}}
}

// TestDeploymentsThroughTheSDK makes the SDK's generated deployment and
// deployment run calls (beta*deployment*_test.go) with real ids, and
// checks what they do.
func TestDeploymentsThroughTheSDK(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaMessageBatches2024_09_24}
	ws := anthropic.String("wrkspc_011CZkZaBF1tNoB5wlCeusgy")

	a := newAgent(t, c, "cron-agent")
	env := newEnv(t, c, "cron-env")
	fileID := uploadFile(t, c, "receipt.pdf", []byte("%PDF-1.4 receipt"))
	vault, err := c.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "deploy"})
	if err != nil {
		t.Fatal(err)
	}

	// The generated create call, with real ids; budget is left out (it is
	// refused below: agentkernel prices no model usage).
	newParams := anthropic.BetaDeploymentNewParams{
		Agent:         anthropic.BetaDeploymentNewParamsAgentUnion{OfString: anthropic.String(a.ID)},
		EnvironmentID: env.ID,
		InitialEvents: deploymentEvents("Where is my order #1234?"),
		Name:          "x",
		Description:   anthropic.String("description"),
		Metadata:      map[string]string{"foo": "string"},
		Resources: []anthropic.BetaDeploymentNewParamsResourceUnion{{OfFile: &anthropic.BetaManagedAgentsFileResourceParams{
			FileID: fileID, Type: anthropic.BetaManagedAgentsFileResourceParamsTypeFile, MountPath: anthropic.String("/uploads/receipt.pdf"),
		}}},
		Schedule: anthropic.BetaManagedAgentsScheduleParams{Expression: "0 9 * * 1-5", Timezone: "America/Los_Angeles",
			Type: anthropic.BetaManagedAgentsScheduleParamsTypeCron},
		VaultIDs:    []string{vault.ID},
		Betas:       betas,
		WorkspaceID: ws,
	}
	dep, err := c.Beta.Deployments.New(ctx, newParams)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if dep.Type != "deployment" || dep.Agent.ID != a.ID || dep.Agent.Version != 1 || dep.EnvironmentID != env.ID ||
		dep.Name != "x" || dep.Description != "description" || dep.Metadata["foo"] != "string" || dep.Status != "active" ||
		len(dep.InitialEvents) != 1 || len(dep.Resources) != 1 || dep.Resources[0].FileID != fileID ||
		len(dep.VaultIDs) != 1 || dep.Schedule.Expression != "0 9 * * 1-5" || dep.Schedule.Timezone != "America/Los_Angeles" ||
		len(dep.Schedule.UpcomingRunsAt) != 5 || !dep.ArchivedAt.IsZero() || dep.PausedReason.Type != "" {
		t.Fatalf("created deployment: %s", dep.RawJSON())
	}
	// 9am in Los Angeles on a weekday.
	la, _ := time.LoadLocation("America/Los_Angeles")
	for _, u := range dep.Schedule.UpcomingRunsAt {
		if l := u.In(la); l.Hour() != 9 || l.Minute() != 0 || l.Weekday() == time.Saturday || l.Weekday() == time.Sunday {
			t.Fatalf("upcoming run %s is not 9:00 on a weekday in Los Angeles", l)
		}
	}

	budget := newParams
	budget.Budget = anthropic.BetaManagedAgentsBudgetLimitParam{MaxListCost: anthropic.BetaMonetaryAmountParam{Amount: "2500",
		Currency: anthropic.BetaCurrencyUSD}, Type: anthropic.BetaManagedAgentsBudgetLimitTypeLimit}
	_, err = c.Beta.Deployments.New(ctx, budget)
	wantStatus(t, "budget", err, 400, "budget", "not supported yet")

	got, err := c.Beta.Deployments.Get(ctx, dep.ID, anthropic.BetaDeploymentGetParams{Betas: betas, WorkspaceID: ws})
	if err != nil || got.ID != dep.ID || got.Name != "x" {
		t.Fatalf("get: %v %v", got, err)
	}

	// The generated update call, with real ids (budget left out).
	a2 := newAgent(t, c, "other-agent")
	env2 := newEnv(t, c, "other-env")
	up, err := c.Beta.Deployments.Update(ctx, dep.ID, anthropic.BetaDeploymentUpdateParams{
		Agent:         anthropic.BetaDeploymentUpdateParamsAgentUnion{OfString: anthropic.String(a2.ID)},
		Description:   anthropic.String("description 2"),
		EnvironmentID: anthropic.String(env2.ID),
		InitialEvents: deploymentEvents("Any news?"),
		Metadata:      map[string]string{"bar": "string"},
		Name:          anthropic.String("name"),
		Resources: []anthropic.BetaDeploymentUpdateParamsResourceUnion{{OfFile: &anthropic.BetaManagedAgentsFileResourceParams{
			FileID: fileID, Type: anthropic.BetaManagedAgentsFileResourceParamsTypeFile, MountPath: anthropic.String("/uploads/receipt.pdf"),
		}}},
		Schedule: anthropic.BetaManagedAgentsScheduleParams{Expression: "30 6 * * 0", Timezone: "UTC",
			Type: anthropic.BetaManagedAgentsScheduleParamsTypeCron},
		VaultIDs:    []string{vault.ID},
		Betas:       betas,
		WorkspaceID: ws,
	})
	if err != nil || up.Agent.ID != a2.ID || up.EnvironmentID != env2.ID || up.Name != "name" || up.Description != "description 2" ||
		up.Metadata["foo"] != "string" || up.Metadata["bar"] != "string" || up.Schedule.Expression != "30 6 * * 0" ||
		up.Schedule.UpcomingRunsAt[0].Weekday() != time.Sunday || up.Schedule.UpcomingRunsAt[0].Hour() != 6 {
		t.Fatalf("update: %v %v", up, err)
	}

	// Bad schedules and fields are 400s naming the field.
	for what, sc := range map[string]anthropic.BetaManagedAgentsScheduleParams{
		"schedule.expression": {Expression: "0 9 * *", Timezone: "UTC"},
		"schedule.timezone":   {Expression: "0 9 * * *", Timezone: "Mars/Olympus"},
	} {
		_, err := c.Beta.Deployments.Update(ctx, dep.ID, anthropic.BetaDeploymentUpdateParams{Schedule: sc})
		wantStatus(t, what, err, 400, what)
	}
	_, err = c.Beta.Deployments.Update(ctx, dep.ID, anthropic.BetaDeploymentUpdateParams{
		Schedule: anthropic.BetaManagedAgentsScheduleParams{Expression: "0 9 L * *", Timezone: "UTC"}})
	wantStatus(t, "extended cron", err, 400, "schedule.expression")
	_, err = c.Beta.Deployments.Update(ctx, dep.ID, anthropic.BetaDeploymentUpdateParams{Name: anthropic.String("")})
	wantStatus(t, "empty name", err, 400, "name")
	_, err = c.Beta.Deployments.Update(ctx, dep.ID, anthropic.BetaDeploymentUpdateParams{VaultIDs: []string{"vlt_missing"}})
	wantStatus(t, "missing vault", err, 404, "vlt_missing")

	// Pause / unpause: the generated calls.
	p, err := c.Beta.Deployments.Pause(ctx, dep.ID, anthropic.BetaDeploymentPauseParams{Betas: betas, WorkspaceID: ws})
	if err != nil || p.Status != "paused" || p.PausedReason.Type != "manual" || len(p.Schedule.UpcomingRunsAt) == 0 {
		t.Fatalf("pause: %v %v", p, err)
	}
	// Run now: the generated call; a paused deployment still runs by hand.
	run, err := c.Beta.Deployments.Run(ctx, dep.ID, anthropic.BetaDeploymentRunParams{Betas: betas, WorkspaceID: ws})
	if err != nil || run.Type != "deployment_run" || run.DeploymentID != dep.ID || run.SessionID == "" || run.Error.Type != "" ||
		run.TriggerContext.Type != "manual" || run.Agent.ID != a2.ID {
		t.Fatalf("run: %v %v", run, err)
	}
	sess, err := c.Beta.Sessions.Get(ctx, run.SessionID, anthropic.BetaSessionGetParams{})
	if err != nil || sess.DeploymentID != dep.ID || sess.Agent.ID != a2.ID || sess.EnvironmentID != env2.ID ||
		len(sess.Resources) != 1 || len(sess.VaultIDs) != 1 {
		t.Fatalf("run's session: %v %v", sess, err)
	}
	evs, err := c.Beta.Sessions.Events.List(ctx, run.SessionID, anthropic.BetaSessionEventListParams{})
	if err != nil || len(evs.Data) == 0 || evs.Data[0].Type != "user.message" || !strings.Contains(evs.Data[0].RawJSON(), "Any news?") {
		t.Fatalf("run's session events: %v %v", evs, err)
	}
	byDep, err := c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{DeploymentID: anthropic.String(dep.ID)})
	if err != nil || len(byDep.Data) != 1 || byDep.Data[0].ID != run.SessionID {
		t.Fatalf("sessions of the deployment: %v %v", byDep, err)
	}
	un, err := c.Beta.Deployments.Unpause(ctx, dep.ID, anthropic.BetaDeploymentUnpauseParams{Betas: betas, WorkspaceID: ws})
	if err != nil || un.Status != "active" || un.PausedReason.Type != "" {
		t.Fatalf("unpause: %v %v", un, err)
	}

	// Deployment runs: the generated get and list calls.
	gr, err := c.Beta.DeploymentRuns.Get(ctx, run.ID, anthropic.BetaDeploymentRunGetParams{Betas: betas, WorkspaceID: ws})
	if err != nil || gr.ID != run.ID || gr.SessionID != run.SessionID {
		t.Fatalf("run get: %v %v", gr, err)
	}
	now := time.Now()
	runs, err := c.Beta.DeploymentRuns.List(ctx, anthropic.BetaDeploymentRunListParams{
		CreatedAtGte: anthropic.Time(now.Add(-time.Hour)), CreatedAtLte: anthropic.Time(now.Add(time.Hour)),
		CreatedAtGt: anthropic.Time(now.Add(-time.Hour)), CreatedAtLt: anthropic.Time(now.Add(time.Hour)),
		DeploymentID: anthropic.String(dep.ID), HasError: anthropic.Bool(false), Limit: anthropic.Int(10),
		TriggerType: anthropic.BetaManagedAgentsTriggerTypeManual, Betas: betas, WorkspaceID: ws,
	})
	if err != nil || len(runs.Data) != 1 || runs.Data[0].ID != run.ID {
		t.Fatalf("run list: %v %v", runs, err)
	}
	for what, params := range map[string]anthropic.BetaDeploymentRunListParams{
		"has_error":    {HasError: anthropic.Bool(true)},
		"trigger_type": {TriggerType: anthropic.BetaManagedAgentsTriggerTypeSchedule},
		"created_at":   {CreatedAtGt: anthropic.Time(now.Add(time.Hour))},
	} {
		l, err := c.Beta.DeploymentRuns.List(ctx, params)
		if err != nil || len(l.Data) != 0 {
			t.Fatalf("run list filtered by %s: %v %v", what, l, err)
		}
	}

	// List: the generated call's filters, with real values and pages.
	second, err := c.Beta.Deployments.New(ctx, anthropic.BetaDeploymentNewParams{
		Agent: anthropic.BetaDeploymentNewParamsAgentUnion{OfBetaManagedAgentsAgents: &anthropic.BetaManagedAgentsAgentParams{
			ID: a.ID, Type: anthropic.BetaManagedAgentsAgentParamsTypeAgent, Version: anthropic.Int(1)}},
		EnvironmentID: env.ID, InitialEvents: deploymentEvents("hi"), Name: "manual only",
	})
	if err != nil || second.Schedule.Expression != "" || second.Agent.Version != 1 {
		t.Fatalf("second create: %v %v", second, err)
	}
	first, err := c.Beta.Deployments.List(ctx, anthropic.BetaDeploymentListParams{
		AgentID: anthropic.String(a2.ID), CreatedAtGte: anthropic.Time(now.Add(-time.Hour)), CreatedAtLte: anthropic.Time(now.Add(time.Hour)),
		IncludeArchived: anthropic.Bool(true), Limit: anthropic.Int(1), Betas: betas, WorkspaceID: ws,
	})
	if err != nil || len(first.Data) != 1 || first.Data[0].ID != dep.ID {
		t.Fatalf("list by agent: %v %v", first, err)
	}
	pageOne, err := c.Beta.Deployments.List(ctx, anthropic.BetaDeploymentListParams{Limit: anthropic.Int(1),
		Status: anthropic.BetaManagedAgentsDeploymentStatusActive})
	if err != nil || len(pageOne.Data) != 1 || pageOne.NextPage == "" {
		t.Fatalf("list page 1: %v %v", pageOne, err)
	}
	pageTwo, err := c.Beta.Deployments.List(ctx, anthropic.BetaDeploymentListParams{Limit: anthropic.Int(1),
		Page: anthropic.String(pageOne.NextPage), Status: anthropic.BetaManagedAgentsDeploymentStatusActive})
	if err != nil || len(pageTwo.Data) != 1 || pageTwo.Data[0].ID == pageOne.Data[0].ID {
		t.Fatalf("list page 2: %v %v", pageTwo, err)
	}
	_, err = c.Beta.Deployments.List(ctx, anthropic.BetaDeploymentListParams{IncludeArchived: anthropic.Bool(true),
		Status: anthropic.BetaManagedAgentsDeploymentStatusActive})
	wantStatus(t, "status with include_archived", err, 400, "include_archived")

	// Archive: the generated call. An archived deployment is read-only,
	// shows no upcoming runs and is listed only with include_archived.
	ar, err := c.Beta.Deployments.Archive(ctx, dep.ID, anthropic.BetaDeploymentArchiveParams{Betas: betas, WorkspaceID: ws})
	if err != nil || ar.ArchivedAt.IsZero() || len(ar.Schedule.UpcomingRunsAt) != 0 {
		t.Fatalf("archive: %v %v", ar, err)
	}
	_, err = c.Beta.Deployments.Run(ctx, dep.ID, anthropic.BetaDeploymentRunParams{})
	wantStatus(t, "run an archived deployment", err, 409, "archived")
	_, err = c.Beta.Deployments.Update(ctx, dep.ID, anthropic.BetaDeploymentUpdateParams{Name: anthropic.String("y")})
	wantStatus(t, "update an archived deployment", err, 409, "archived")
	all, err := c.Beta.Deployments.List(ctx, anthropic.BetaDeploymentListParams{})
	if err != nil || len(all.Data) != 1 || all.Data[0].ID != second.ID {
		t.Fatalf("default list after archive: %v %v", all, err)
	}

	// Another tenant's ids are not found.
	other := sdkClient(d, tenantKey(t, d, "other"))
	_, err = other.Beta.Deployments.Get(ctx, second.ID, anthropic.BetaDeploymentGetParams{})
	wantStatus(t, "other tenant's deployment", err, 404, second.ID)
	_, err = other.Beta.Deployments.Run(ctx, second.ID, anthropic.BetaDeploymentRunParams{})
	wantStatus(t, "other tenant's run now", err, 404, second.ID)
	_, err = other.Beta.Deployments.Pause(ctx, second.ID, anthropic.BetaDeploymentPauseParams{})
	wantStatus(t, "other tenant's pause", err, 404, second.ID)
	_, err = other.Beta.DeploymentRuns.Get(ctx, run.ID, anthropic.BetaDeploymentRunGetParams{})
	wantStatus(t, "other tenant's run", err, 404, run.ID)
	ol, err := other.Beta.DeploymentRuns.List(ctx, anthropic.BetaDeploymentRunListParams{DeploymentID: anthropic.String(dep.ID)})
	if err != nil || len(ol.Data) != 0 {
		t.Fatalf("other tenant's run list: %v %v", ol, err)
	}
	// Another tenant's agent cannot be deployed.
	_, err = other.Beta.Deployments.New(ctx, anthropic.BetaDeploymentNewParams{
		Agent: anthropic.BetaDeploymentNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID,
		InitialEvents: deploymentEvents("hi"), Name: "n"})
	wantStatus(t, "other tenant's agent", err, 404, a.ID)
}
