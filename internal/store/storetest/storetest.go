// Package storetest is the one contract suite every store engine passes
// (River's riverdrivertest style): an engine's test calls Exercise with a
// factory that returns a fresh, empty store, and Benchmark to measure the
// same workload on every engine.
//
// The suite checks the behaviour the store package documents, the bad paths
// (ErrNotFound, ErrAlreadyExists, *StaleStateError, ErrInvalid) and the
// races the seeds call atomic. It has no timing thresholds, and sleeps only
// where the store's own clock must pass: the lease cases (ExerciseLeases)
// wait for a 1ms lease to lapse, retrying every millisecond.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Exercise runs the contract suite. newStore must return a fresh, empty store
// for each call and arrange its Close with t.Cleanup.
func Exercise(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Sessions", sessionCases},
		{"Status", statusCases},
		{"Concurrency", concurrencyCases},
		{"Messages", messageCases},
		{"Runs", runCases},
		{"Checkpoints", checkpointCases},
		{"Staging", stagingCases},
		{"Lifecycle", lifecycleCases},
		{"SubSessions", subSessionCases},
		{"Tenants", tenantCases},
		{"BlobRefs", blobRefCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					s := newStore(t)
					c.fn(newEnv(ctx, t, s))
				})
			}
		})
	}
}

type testCase struct {
	name string
	fn   func(e *env)
}

// env carries one subtest's store and a tenant that owns its sessions (so
// an engine that ties sessions to existing tenants passes too).
type env struct {
	ctx    context.Context
	t      *testing.T
	s      store.Store
	tenant string
	n      int
}

func newEnv(ctx context.Context, t *testing.T, s store.Store) *env {
	t.Helper()
	tn, err := s.CreateTenant(ctx, store.Tenant{Name: "tenant-" + t.Name()})
	if err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
	return &env{ctx: ctx, t: t, s: s, tenant: tn.ID}
}

// session creates a session with a fresh id.
func (e *env) session() *store.Session {
	e.t.Helper()
	e.n++
	return e.sessionWith(store.CreateSessionParams{ID: fmt.Sprintf("sesn_test_%03d", e.n)})
}

func (e *env) sessionWith(p store.CreateSessionParams) *store.Session {
	e.t.Helper()
	if p.TenantID == "" {
		p.TenantID = e.tenant
	}
	if p.AgentType == "" {
		p.AgentType = "test-agent"
	}
	s, err := e.s.CreateSession(e.ctx, p)
	if err != nil {
		e.t.Fatalf("CreateSession(%q): %v", p.ID, err)
	}
	return s
}

func (e *env) get(id string) *store.Session {
	e.t.Helper()
	s, err := e.s.GetSession(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetSession(%q): %v", id, err)
	}
	return s
}

func (e *env) appendMsgs(id string, contents ...string) int64 {
	e.t.Helper()
	last, err := e.s.AppendMessages(e.ctx, id, msgs(contents...))
	if err != nil {
		e.t.Fatalf("AppendMessages(%q): %v", id, err)
	}
	return last
}

func (e *env) messages(id string) []store.Message {
	e.t.Helper()
	m, err := e.s.GetMessages(e.ctx, store.GetMessagesParams{SessionID: id})
	if err != nil {
		e.t.Fatalf("GetMessages(%q): %v", id, err)
	}
	return m
}

// msgs makes user messages whose content is the JSON string of each text.
func msgs(texts ...string) []store.NewMessage {
	out := make([]store.NewMessage, len(texts))
	for i, s := range texts {
		b, _ := json.Marshal(s)
		out[i] = store.NewMessage{Role: "user", Content: b}
	}
	return out
}

// texts decodes the JSON string contents written by msgs.
func texts(t *testing.T, ms []store.Message) []string {
	t.Helper()
	out := make([]string, len(ms))
	for i, m := range ms {
		if err := json.Unmarshal(m.Content, &out[i]); err != nil {
			t.Fatalf("message %d content %s: %v", m.Seq, m.Content, err)
		}
	}
	return out
}

func mustErrIs(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func mustOK(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// jsonEq compares JSON semantically: engines may reorder keys or respace.
func jsonEq(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: stored JSON %q does not parse: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: want JSON %q does not parse: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: got %s, want %s", what, got, want)
	}
}

func ptr[T any](v T) *T { return &v }

func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}
