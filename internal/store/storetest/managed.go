package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseManaged runs the ManagedStore contract (agents, environments,
// Managed Agents sessions, their events and run rows) and the BranchStore
// contract (the one session model: steps, turns, fork, rewind, branches).
// newStore must return
// a fresh, empty store for each call and arrange its Close with t.Cleanup.
// Managed resources carry tenant ids without a tenant row, so an engine
// must not tie them to the tenants table.
func ExerciseManaged(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	groups := []struct {
		name  string
		cases []mgCase
	}{
		{"Agents", mgAgentCases},
		{"Environments", mgEnvironmentCases},
		{"Deployments", mgDeploymentCases},
		{"Sessions", mgSessionCases},
		{"Events", mgEventCases},
		{"RunRows", mgRunRowCases},
		{"Races", mgRaceCases},
		{"Pending", mgPendingCases},
		{"Branches", mgBranchCases},
		{"EventOps", mgEventOpCases},
		{"Webhooks", mgWebhookCases},
		{"Work", mgWorkCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					c.fn(&mgEnv{ctx: ctx, t: t, s: newStore(t)})
				})
			}
		})
	}
}

type mgCase struct {
	name string
	fn   func(e *mgEnv)
}

type mgEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.Store
}

const (
	mgTenant      = "tnt_a"
	mgOtherTenant = "tnt_b"
)

func (e *mgEnv) agent(a store.Agent) *store.Agent {
	e.t.Helper()
	if a.TenantID == "" {
		a.TenantID = mgTenant
	}
	out, err := e.s.CreateAgent(e.ctx, &a)
	mustOK(e.t, err, fmt.Sprintf("CreateAgent(%q)", a.ID))
	return out
}

func (e *mgEnv) getAgent(id string, version int64) *store.Agent {
	e.t.Helper()
	a, err := e.s.GetAgent(e.ctx, id, version)
	mustOK(e.t, err, fmt.Sprintf("GetAgent(%q, %d)", id, version))
	return a
}

func (e *mgEnv) environment(en store.Environment) *store.Environment {
	e.t.Helper()
	if en.TenantID == "" {
		en.TenantID = mgTenant
	}
	out, err := e.s.CreateEnvironment(e.ctx, &en)
	mustOK(e.t, err, fmt.Sprintf("CreateEnvironment(%q)", en.ID))
	return out
}

func (e *mgEnv) session(m store.ManagedSession) *store.ManagedSession {
	e.t.Helper()
	if m.TenantID == "" {
		m.TenantID = mgTenant
	}
	out, err := e.s.CreateManagedSession(e.ctx, &m)
	mustOK(e.t, err, fmt.Sprintf("CreateManagedSession(%q)", m.ID))
	return out
}

func (e *mgEnv) getSession(id string) *store.ManagedSession {
	e.t.Helper()
	m, err := e.s.GetManagedSession(e.ctx, id)
	mustOK(e.t, err, fmt.Sprintf("GetManagedSession(%q)", id))
	return m
}

// appendTypes appends one event per type, data {"n": i}.
func (e *mgEnv) appendTypes(sessionID string, types ...string) []store.SessionEvent {
	e.t.Helper()
	evs := make([]store.NewEvent, len(types))
	for i, typ := range types {
		evs[i] = store.NewEvent{Type: typ, Data: json.RawMessage(fmt.Sprintf(`{"type":%q,"n":%d}`, typ, i))}
	}
	out, err := e.s.AppendEvents(e.ctx, sessionID, evs)
	mustOK(e.t, err, fmt.Sprintf("AppendEvents(%q)", sessionID))
	return out
}

func (e *mgEnv) events(p store.ListEventsParams) []store.SessionEvent {
	e.t.Helper()
	out, err := e.s.ListEvents(e.ctx, p)
	mustOK(e.t, err, fmt.Sprintf("ListEvents(%+v)", p))
	return out
}

func (e *mgEnv) lastSeq(sessionID string) int64 {
	e.t.Helper()
	n, err := e.s.LastEventSeq(e.ctx, sessionID)
	mustOK(e.t, err, fmt.Sprintf("LastEventSeq(%q)", sessionID))
	return n
}

func (e *mgEnv) runRow(r store.RunRow) *store.RunRow {
	e.t.Helper()
	out, err := e.s.InsertRunRow(e.ctx, &r)
	mustOK(e.t, err, fmt.Sprintf("InsertRunRow(%q)", r.SessionID))
	return out
}

// mgIDs returns the ids of any listed resources, in order.
func mgIDs[T any](t *testing.T, what string, list []T, err error, id func(T) string) []string {
	t.Helper()
	mustOK(t, err, what)
	out := []string{}
	for _, v := range list {
		out = append(out, id(v))
	}
	return out
}

func mgEqualIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func mgSeqs(evs []store.SessionEvent) []int64 {
	out := []int64{}
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

func mgEqualSeqs(t *testing.T, what string, got []store.SessionEvent, want ...int64) {
	t.Helper()
	if fmt.Sprint(mgSeqs(got)) != fmt.Sprint(append([]int64{}, want...)) {
		t.Fatalf("%s: got seqs %v, want %v", what, mgSeqs(got), want)
	}
}

// mgUTC checks that a time the store returned is in UTC at microsecond
// precision, as the contract promises.
func mgUTC(t *testing.T, what string, v time.Time) {
	t.Helper()
	if v.Location() != time.UTC {
		t.Fatalf("%s: %v is not in UTC", what, v)
	}
	if v.Nanosecond()%1000 != 0 {
		t.Fatalf("%s: %v has sub-microsecond digits", what, v)
	}
}

func mgHasPrefix(t *testing.T, what, id, prefix string) {
	t.Helper()
	if !strings.HasPrefix(id, prefix+"_") || len(id) <= len(prefix)+1 {
		t.Fatalf("%s: generated id %q, want %s_<id>", what, id, prefix)
	}
}
