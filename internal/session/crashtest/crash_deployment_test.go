package crashtest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon"
	"github.com/agentkernel/agentkernel/internal/store"
)

// openNodeStore opens the stopped node's store (its engine and database).
func openNodeStore(t *testing.T, n *node) store.Store {
	t.Helper()
	cfg, _, err := config.Load(config.Flags{ConfigPath: filepath.Join(n.home, "agentkernel.toml"), Home: n.home}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := daemon.OpenStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDeploymentDueWhileDownFiresOnce: a yearly deployment whose fires of
// two years came due while the daemon was down (its stored next fire set
// back two years) fires once after restart, not once per missed fire. The
// daemon is SIGKILLed between claiming that fire and creating its
// session; the next start creates the claimed run's session: one run, one
// session, and the schedule continues next year.
func TestDeploymentDueWhileDownFiresOnce(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		n := newNode(t, engine, "http://127.0.0.1:1")
		n.start()
		c := n.client()
		a, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "a", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-crash"}})
		if err != nil {
			t.Fatal(err)
		}
		env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "e"})
		if err != nil {
			t.Fatal(err)
		}
		dep, err := c.Beta.Deployments.New(ctx, anthropic.BetaDeploymentNewParams{
			Agent: anthropic.BetaDeploymentNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID, Name: "yearly",
			InitialEvents: []anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
				Type: anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
				Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{
					Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: "happy new year"}}},
			}}},
			Schedule: anthropic.BetaManagedAgentsScheduleParams{Expression: "0 0 1 1 *", Timezone: "UTC", Type: anthropic.BetaManagedAgentsScheduleParamsTypeCron},
		})
		if err != nil {
			t.Fatal(err)
		}
		n.kill()

		// Down across two new years.
		st := openNodeStore(t, n)
		row, err := st.GetDeployment(ctx, dep.ID)
		if err != nil || row.NextFireAt == nil {
			t.Fatalf("deployment row: %+v %v", row, err)
		}
		missed := row.NextFireAt.AddDate(-2, 0, 0)
		row.NextFireAt = &missed
		if _, err := st.PutDeployment(ctx, row); err != nil {
			t.Fatal(err)
		}
		st.Close()

		n.arm("deployment-claim-hang")
		n.start()
		n.waitReached("deployment-claim-hang")
		n.kill()
		n.disarm("deployment-claim-hang")
		st = openNodeStore(t, n)
		claimed, err := st.UnstartedDeploymentRuns(ctx)
		st.Close()
		if err != nil || len(claimed) != 1 || claimed[0].DeploymentID != dep.ID {
			t.Fatalf("runs claimed before the kill: %+v %v (want one, unstarted)", claimed, err)
		}

		n.start()
		c = n.client()
		var runs []anthropic.BetaManagedAgentsDeploymentRun
		for deadline := time.Now().Add(60 * time.Second); ; {
			page, err := c.Beta.DeploymentRuns.List(ctx, anthropic.BetaDeploymentRunListParams{DeploymentID: anthropic.String(dep.ID)})
			if err != nil {
				t.Fatal(err)
			}
			if runs = page.Data; len(runs) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the claimed run never started\n%s", n.logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(runs) != 1 || runs[0].ID != claimed[0].ID || runs[0].SessionID == "" || runs[0].TriggerContext.Type != "schedule" ||
			!runs[0].TriggerContext.ScheduledAt.Equal(missed) {
			t.Fatalf("runs after restart: %+v (want the claimed run, with its session)", runs)
		}
		sessions, err := c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{})
		if err != nil || len(sessions.Data) != 1 || sessions.Data[0].ID != runs[0].SessionID || sessions.Data[0].DeploymentID != dep.ID {
			t.Fatalf("sessions after restart: %v %v (want the run's one)", sessions, err)
		}
		got, err := c.Beta.Deployments.Get(ctx, dep.ID, anthropic.BetaDeploymentGetParams{})
		if err != nil || got.Schedule.LastRunAt.IsZero() || len(got.Schedule.UpcomingRunsAt) == 0 ||
			!got.Schedule.UpcomingRunsAt[0].After(time.Now()) {
			t.Fatalf("deployment after restart: %v %v", got, err)
		}
		n.stop()
		st = openNodeStore(t, n)
		defer st.Close()
		row, err = st.GetDeployment(ctx, dep.ID)
		if err != nil || row.NextFireAt == nil || !row.NextFireAt.After(time.Now()) {
			t.Fatalf("next fire after restart: %v %v (want next new year, not a missed one)", row.NextFireAt, err)
		}
	})
}
