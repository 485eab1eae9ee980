package managed

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// schedFixture is a service and a scheduler on one fake clock, with a
// deployment firing every 5 minutes (UTC).
type schedFixture struct {
	t     *testing.T
	ctx   context.Context
	s     *Service
	clk   *clock.Fake
	sched *DeploymentScheduler
	id    string
}

func newSchedFixture(t *testing.T) *schedFixture {
	t.Helper()
	f := &schedFixture{t: t, ctx: context.Background(), clk: clock.NewFake(time.Date(2030, 1, 7, 12, 1, 0, 0, time.UTC))}
	f.s = newService(t)
	f.s.now = f.clk.Now
	f.s.events = session.NewEventLog(f.s.st, session.EventLogConfig{})
	f.sched = f.s.NewDeploymentScheduler(SchedulerConfig{Clock: f.clk})
	a, err := f.s.CreateAgent(f.ctx, "ten_a", body(t, `{"name": "a", "model": "claude-sonnet-4-5"}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := f.s.CreateEnvironment(f.ctx, "ten_a", body(t, `{"name": "e"}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.s.CreateDeployment(f.ctx, "ten_a", body(t, fmt.Sprintf(`{"agent": %q, "environment_id": %q, "name": "every5",
		"initial_events": [{"type": "user.message", "content": [{"type": "text", "text": "tick"}]}],
		"schedule": {"type": "cron", "expression": "*/5 * * * *", "timezone": "UTC"}}`, a["id"], e["id"])))
	if err != nil {
		t.Fatal(err)
	}
	f.id = d["id"].(string)
	return f
}

// poll runs one poll at now+d and returns the runs it started.
func (f *schedFixture) poll(advance time.Duration) int {
	f.t.Helper()
	f.clk.Advance(advance)
	n, err := f.sched.Poll(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// runs lists the deployment's runs, each checked to have its session.
func (f *schedFixture) runs() []*store.DeploymentRun {
	f.t.Helper()
	list, err := f.s.ListDeploymentRuns(f.ctx, "ten_a", store.ListDeploymentRunsParams{DeploymentID: f.id})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range list {
		if r.SessionID == "" {
			f.t.Fatalf("run %s has no session (error %s)", r.ID, r.Error)
		}
		if _, err := f.s.Session(f.ctx, "ten_a", r.SessionID); err != nil {
			f.t.Fatalf("run %s: session %s: %v", r.ID, r.SessionID, err)
		}
	}
	return list
}

func (f *schedFixture) sessions() int {
	f.t.Helper()
	l, err := f.s.st.ListManagedSessions(f.ctx, store.ListResourcesParams{TenantID: "ten_a"})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(l)
}

func TestScheduledDeploymentFiresOncePerDueTime(t *testing.T) {
	f := newSchedFixture(t)
	if n := f.poll(3 * time.Minute); n != 0 { // 12:04
		t.Fatalf("fired %d runs before 12:05", n)
	}
	if n := f.poll(time.Minute); n != 1 { // 12:05
		t.Fatalf("fired %d runs at 12:05, want 1", n)
	}
	if n := f.poll(0); n != 0 {
		t.Fatalf("fired the 12:05 run again: %d", n)
	}
	runs := f.runs()
	if len(runs) != 1 || runs[0].Trigger != store.TriggerSchedule || !runs[0].ScheduledAt.Equal(time.Date(2030, 1, 7, 12, 5, 0, 0, time.UTC)) {
		t.Fatalf("runs: %+v", runs)
	}
	// Down from 12:06 to 12:31: the five missed fires make one run, and
	// the schedule continues at 12:35.
	if n := f.poll(26 * time.Minute); n != 1 {
		t.Fatalf("fired %d runs for the missed 12:10-12:30 fires, want 1", n)
	}
	row, _, err := f.s.deployment(f.ctx, "ten_a", f.id)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2030, 1, 7, 12, 35, 0, 0, time.UTC); row.NextFireAt == nil || !row.NextFireAt.Equal(want) {
		t.Fatalf("next fire %v, want %v", row.NextFireAt, want)
	}
	if got := len(f.runs()); got != 2 || f.sessions() != 2 {
		t.Fatalf("%d runs and %d sessions, want 2 and 2", got, f.sessions())
	}
}

func TestPausedDeploymentFiresNothing(t *testing.T) {
	f := newSchedFixture(t)
	if _, err := f.s.PauseDeployment(f.ctx, "ten_a", f.id); err != nil {
		t.Fatal(err)
	}
	if n := f.poll(2 * time.Hour); n != 0 {
		t.Fatalf("a paused deployment fired %d runs", n)
	}
	// Unpausing resumes from now: what was missed while paused is not
	// made up.
	if _, err := f.s.UnpauseDeployment(f.ctx, "ten_a", f.id); err != nil {
		t.Fatal(err)
	}
	if n := f.poll(0); n != 0 {
		t.Fatalf("unpausing fired %d runs missed while paused", n)
	}
	if n := f.poll(5 * time.Minute); n != 1 {
		t.Fatalf("fired %d runs after unpausing, want 1", n)
	}
	// Archived: nothing more.
	if _, err := f.s.ArchiveDeployment(f.ctx, "ten_a", f.id); err != nil {
		t.Fatal(err)
	}
	if n := f.poll(time.Hour); n != 0 {
		t.Fatalf("an archived deployment fired %d runs", n)
	}
}

// A crash between the claim and the session leaves an unstarted run: the
// next poll starts it, once, with one session; a crash after the session
// was made and before the run recorded it finds that session.
func TestClaimedRunIsStartedOnceAfterACrash(t *testing.T) {
	f := newSchedFixture(t)
	f.clk.Advance(4 * time.Minute)
	row, _, err := f.s.deployment(f.ctx, "ten_a", f.id)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := f.sched.claim(f.ctx, row) // the crash: no start
	if err != nil {
		t.Fatal(err)
	}
	if f.sessions() != 0 {
		t.Fatal("a claim made a session")
	}
	// A fresh scheduler (the restarted daemon) starts it.
	restarted := f.s.NewDeploymentScheduler(SchedulerConfig{Clock: f.clk})
	if n, err := restarted.Poll(f.ctx); err != nil || n != 1 {
		t.Fatalf("restart poll started %d (%v), want the claimed run only", n, err)
	}
	runs := f.runs()
	if len(runs) != 1 || runs[0].ID != claimed.ID || f.sessions() != 1 {
		t.Fatalf("%d runs, %d sessions; want the claimed run with one session", len(runs), f.sessions())
	}

	// The session made, the run not told: the restart records that one.
	row, _, _ = f.s.deployment(f.ctx, "ten_a", f.id)
	f.clk.Advance(5 * time.Minute)
	second, err := f.sched.claim(f.ctx, row)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := decodeDeploymentDoc(row.Doc)
	b, _ := d.sessionBody(d.Agent)
	if _, err := f.s.createSession(f.ctx, "ten_a", b, sessionCreate{id: runSessionID(second.ID), deploymentID: f.id}); err != nil {
		t.Fatal(err)
	}
	if n, err := restarted.Poll(f.ctx); err != nil || n != 1 {
		t.Fatalf("restart poll started %d (%v), want 1", n, err)
	}
	if got := len(f.runs()); got != 2 || f.sessions() != 2 {
		t.Fatalf("%d runs and %d sessions, want 2 and 2", got, f.sessions())
	}
}

func TestDeploymentScheduleRefusals(t *testing.T) {
	for _, c := range []struct{ expr, tz, field string }{
		{"* * * *", "UTC", "schedule.expression"},
		{"0 0 * * * *", "UTC", "schedule.expression"},
		{"@daily", "UTC", "schedule.expression"},
		{"0 9 ? * 1", "UTC", "schedule.expression"},
		{"61 * * * *", "UTC", "schedule.expression"},
		{"0 9 * * *", "Nowhere/Town", "schedule.timezone"},
		{"0 9 * * *", "", "schedule.timezone"},
	} {
		_, err := parseSchedule("schedule", c.expr, c.tz)
		ie, ok := err.(*InputError)
		if !ok || ie.Status != 400 || ie.Field != c.field {
			t.Fatalf("%q %q: %v, want a 400 naming %s", c.expr, c.tz, err, c.field)
		}
	}
	// Day-of-week 7 is Sunday, as in POSIX cron.
	sc, err := parseSchedule("schedule", "0 6 * * 5-7", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	days := map[time.Weekday]bool{}
	for _, u := range sc.upcoming(time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC), 5) {
		days[u.Weekday()] = true
	}
	if !days[time.Friday] || !days[time.Saturday] || !days[time.Sunday] || len(days) != 3 {
		t.Fatalf("5-7 fired on %v, want Friday to Sunday", days)
	}
}

// A scheduled run whose agent was archived records the error and pauses
// the deployment, saying why: the later fires would all fail.
func TestFailedScheduledRunPausesTheDeployment(t *testing.T) {
	f := newSchedFixture(t)
	_, d, err := f.s.deployment(f.ctx, "ten_a", f.id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.ArchiveAgent(f.ctx, "ten_a", d.Agent.ID); err != nil {
		t.Fatal(err)
	}
	if n := f.poll(4 * time.Minute); n != 1 {
		t.Fatalf("fired %d runs at 12:05, want 1", n)
	}
	runs, err := f.s.ListDeploymentRuns(f.ctx, "ten_a", store.ListDeploymentRunsParams{DeploymentID: f.id})
	if err != nil || len(runs) != 1 || runs[0].SessionID != "" || !strings.Contains(string(runs[0].Error), `"agent_archived_error"`) {
		t.Fatalf("runs: %+v %s %v", runs, runs[0].Error, err)
	}
	got, err := f.s.GetDeployment(f.ctx, "ten_a", f.id)
	if err != nil || got["status"] != "paused" || !strings.Contains(string(MustJSON(got["paused_reason"])), `"agent_archived_error"`) {
		t.Fatalf("deployment after the failed run: %v %v", got, err)
	}
	if n := f.poll(time.Hour); n != 0 || f.sessions() != 0 {
		t.Fatalf("the paused deployment fired %d more runs", n)
	}
}
