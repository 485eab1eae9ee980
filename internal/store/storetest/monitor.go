package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseMonitor runs the MonitorStore contract (seed 001: tickets, tasks,
// agent events and activity, transcripts, terminations, diagnostic
// safeguards, workflow results). newStore must return a fresh, empty store
// for each call and arrange its Close with t.Cleanup.
func ExerciseMonitor(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.MonitorStore) {
	t.Helper()
	groups := []struct {
		name  string
		cases []monCase
	}{
		{"Tickets", monTicketCases},
		{"Tasks", monTaskCases},
		{"AgentEvents", monEventCases},
		{"Records", monRecordCases},
		{"Diagnostics", monDiagnosticCases},
		{"MonitorRaces", monRaceCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					c.fn(&monEnv{ctx: ctx, t: t, s: newStore(t)})
				})
			}
		})
	}
}

type monCase struct {
	name string
	fn   func(e *monEnv)
}

type monEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.MonitorStore
	n   int
}

// monEpoch is microsecond-precise and not UTC, so engines must compare
// instants, not wall clocks.
var monEpoch = time.Date(2032, 5, 6, 7, 8, 9, 654321000, time.FixedZone("UTC-3", -3*3600))

func monAt(d time.Duration) time.Time { return monEpoch.Add(d) }

func (e *monEnv) nextID(prefix string) string {
	e.n++
	return fmt.Sprintf("%s_test_%03d", prefix, e.n)
}

func (e *monEnv) ticket(tenant string) *store.Ticket {
	e.t.Helper()
	tk, err := e.s.CreateTicket(e.ctx, &store.Ticket{ID: e.nextID("tkt"), TenantID: tenant, Title: "fix the build"})
	mustOK(e.t, err, "CreateTicket")
	return tk
}

func (e *monEnv) task(tk store.Task) *store.Task {
	e.t.Helper()
	if tk.ID == "" {
		tk.ID = e.nextID("tsk")
	}
	if tk.Command == nil {
		tk.Command = json.RawMessage(`["sh","-c","claude -p 'fix it'"]`)
	}
	out, err := e.s.CreateTask(e.ctx, &tk)
	mustOK(e.t, err, "CreateTask "+tk.ID)
	return out
}

func monSameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func monSameTimePtr(t *testing.T, what string, got, want *time.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Fatalf("%s: got %v, want %v", what, got, want)
	default:
		monSameTime(t, what, *got, *want)
	}
}

func monIDs[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = id(it)
	}
	return out
}

func monEqualIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

var monTicketCases = []monCase{
	{"CreateGetDefaults", testMonTicketCreate},
	{"DuplicateID", testMonTicketDuplicate},
	{"ListFilters", testMonTicketList},
	{"UpdateCAS", testMonTicketUpdate},
	{"WorkflowResult", testMonWorkflowResult},
}

func testMonTicketCreate(e *monEnv) {
	in := &store.Ticket{TenantID: "tnt_a", Title: "t", Description: "d", Metadata: map[string]string{"k": "v"},
		CreatedAt: monAt(0)}
	tk, err := e.s.CreateTicket(e.ctx, in)
	mustOK(e.t, err, "CreateTicket")
	if len(tk.ID) < 5 || tk.ID[:4] != "tkt_" {
		e.t.Fatalf("generated id %q: want prefix tkt_", tk.ID)
	}
	equal(e.t, "status", tk.Status, store.TicketOpen)
	equal(e.t, "version", tk.Version, int64(1))
	monSameTime(e.t, "created", tk.CreatedAt, monAt(0))
	got, err := e.s.GetTicket(e.ctx, tk.ID)
	mustOK(e.t, err, "GetTicket")
	equal(e.t, "title", got.Title, "t")
	equal(e.t, "description", got.Description, "d")
	equal(e.t, "metadata", got.Metadata["k"], "v")
	monSameTime(e.t, "read created", got.CreatedAt, monAt(0))
	_, err = e.s.GetTicket(e.ctx, "tkt_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetTicket missing")
	_, err = e.s.CreateTicket(e.ctx, &store.Ticket{Status: "bogus"})
	mustErrIs(e.t, err, store.ErrInvalid, "CreateTicket bad status")
	d, err := e.s.GetDiagnosticState(e.ctx, tk.ID)
	mustOK(e.t, err, "GetDiagnosticState of a new ticket")
	equal(e.t, "new ticket attempts", d.Attempts, int64(0))
	equal(e.t, "new ticket pending", d.PendingTaskID, "")
}

func testMonTicketDuplicate(e *monEnv) {
	tk := e.ticket("tnt_a")
	_, err := e.s.CreateTicket(e.ctx, &store.Ticket{ID: tk.ID})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateTicket duplicate")
}

func testMonTicketList(e *monEnv) {
	a1, a2, b1 := e.ticket("tnt_a"), e.ticket("tnt_a"), e.ticket("tnt_b")
	a2.Status = store.TicketDone
	_, err := e.s.UpdateTicket(e.ctx, a2)
	mustOK(e.t, err, "UpdateTicket done")
	id := func(t *store.Ticket) string { return t.ID }
	all, err := e.s.ListTickets(e.ctx, store.ListTicketsParams{})
	mustOK(e.t, err, "ListTickets")
	monEqualIDs(e.t, "all tenants", monIDs(all, id), a1.ID, a2.ID, b1.ID)
	ta, err := e.s.ListTickets(e.ctx, store.ListTicketsParams{TenantID: "tnt_a"})
	mustOK(e.t, err, "ListTickets tenant")
	monEqualIDs(e.t, "tenant a", monIDs(ta, id), a1.ID, a2.ID)
	open, err := e.s.ListTickets(e.ctx, store.ListTicketsParams{Statuses: []store.TicketStatus{store.TicketOpen}})
	mustOK(e.t, err, "ListTickets open")
	monEqualIDs(e.t, "open (the diagnostic sweep's not-done)", monIDs(open, id), a1.ID, b1.ID)
	page, err := e.s.ListTickets(e.ctx, store.ListTicketsParams{AfterID: a1.ID, Limit: 1})
	mustOK(e.t, err, "ListTickets page")
	monEqualIDs(e.t, "page", monIDs(page, id), a2.ID)
}

func testMonTicketUpdate(e *monEnv) {
	tk := e.ticket("tnt_a")
	stale := *tk
	tk.Title, tk.Status = "new title", store.TicketDone
	up, err := e.s.UpdateTicket(e.ctx, tk)
	mustOK(e.t, err, "UpdateTicket")
	equal(e.t, "version", up.Version, int64(2))
	equal(e.t, "title", up.Title, "new title")
	equal(e.t, "status", up.Status, store.TicketDone)
	stale.Title = "stale"
	_, err = e.s.UpdateTicket(e.ctx, &stale)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "UpdateTicket stale")
	got, err := e.s.GetTicket(e.ctx, tk.ID)
	mustOK(e.t, err, "GetTicket")
	equal(e.t, "title after stale update", got.Title, "new title")
	_, err = e.s.UpdateTicket(e.ctx, &store.Ticket{ID: "tkt_missing", Status: store.TicketOpen, Version: 1})
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateTicket missing")
}

func testMonWorkflowResult(e *monEnv) {
	tk := e.ticket("tnt_a")
	_, err := e.s.GetWorkflowResult(e.ctx, tk.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetWorkflowResult before submit")
	r, err := e.s.SubmitWorkflowResult(e.ctx, &store.WorkflowResult{TicketID: tk.ID, TaskID: "tsk_x",
		Result: json.RawMessage(`{"pr":"https://example/1"}`), SubmittedAt: monAt(time.Minute)})
	mustOK(e.t, err, "SubmitWorkflowResult")
	equal(e.t, "default validation", r.ValidationStatus, store.ValidationPending)
	equal(e.t, "version", r.Version, int64(1))
	r, err = e.s.SubmitWorkflowResult(e.ctx, &store.WorkflowResult{TicketID: tk.ID,
		Result: json.RawMessage(`{"pr":"https://example/2"}`), ValidationStatus: store.ValidationValid,
		ValidationNote: "tests pass", SubmittedAt: monAt(2 * time.Minute)})
	mustOK(e.t, err, "SubmitWorkflowResult again")
	equal(e.t, "version after resubmit", r.Version, int64(2))
	got, err := e.s.GetWorkflowResult(e.ctx, tk.ID)
	mustOK(e.t, err, "GetWorkflowResult")
	equal(e.t, "validation", got.ValidationStatus, store.ValidationValid)
	equal(e.t, "note", got.ValidationNote, "tests pass")
	equal(e.t, "task replaced", got.TaskID, "")
	jsonEq(e.t, "result", got.Result, `{"pr":"https://example/2"}`)
	monSameTime(e.t, "submitted", got.SubmittedAt, monAt(2*time.Minute))
	_, err = e.s.SubmitWorkflowResult(e.ctx, &store.WorkflowResult{TicketID: "tkt_missing"})
	mustErrIs(e.t, err, store.ErrNotFound, "SubmitWorkflowResult unknown ticket")
	_, err = e.s.SubmitWorkflowResult(e.ctx, &store.WorkflowResult{TicketID: tk.ID, ValidationStatus: "validated"})
	mustErrIs(e.t, err, store.ErrInvalid, "SubmitWorkflowResult bad status")
	_, err = e.s.SubmitWorkflowResult(e.ctx, &store.WorkflowResult{TicketID: tk.ID, Result: json.RawMessage(`{`)})
	mustErrIs(e.t, err, store.ErrInvalid, "SubmitWorkflowResult bad JSON")
}
